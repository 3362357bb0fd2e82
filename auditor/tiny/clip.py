"""A tiny randomly initialised CLIP model with its processor, saved like a hub checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from auditor.tiny.tokenizers import clip_tokenizer

#: Side of the square images the tiny vision towers take.
IMAGE_SIZE = 32


def clip_text_config(tokenizer: Any) -> dict[str, Any]:
    """A two-layer CLIP text tower sized to ``tokenizer`` (CLIP's and OWLv2's text towers are the same)."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": tokenizer.model_max_length,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }


def build_clip(folder: Path, seed: int) -> None:
    """Save a ``CLIPModel`` and ``CLIPProcessor`` into ``folder`` (loadable by ``from_pretrained``)."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    tokenizer = clip_tokenizer()
    config = CLIPConfig(
        text_config=clip_text_config(tokenizer),
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "image_size": IMAGE_SIZE,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    torch.manual_seed(seed)
    CLIPModel(config).eval().save_pretrained(folder)
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)
