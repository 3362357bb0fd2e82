"""A tiny randomly initialised BLIP-2 (vision tower + Q-Former + OPT) with its processor.

Same architecture family as ``Salesforce/blip2-opt-2.7b``, the TIBET paper's VQA model,
so the VQA backend's BLIP-2 path runs unchanged on it; its answers are random words.
"""

from __future__ import annotations

from pathlib import Path

from auditor.tiny.tokenizers import opt_tokenizer

IMAGE_SIZE = 32
NUM_QUERY_TOKENS = 4


def build_vqa(folder: Path, seed: int) -> None:
    """Save a ``Blip2ForConditionalGeneration`` and ``Blip2Processor`` into ``folder``."""
    import torch
    from transformers import (
        Blip2Config,
        Blip2ForConditionalGeneration,
        Blip2Processor,
        BlipImageProcessor,
    )

    image_processor = BlipImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    # The processor adds BLIP-2's "<image>" placeholder token to the tokenizer: size the
    # language model's vocabulary after that.
    processor = Blip2Processor(
        image_processor=image_processor, tokenizer=opt_tokenizer(), num_query_tokens=NUM_QUERY_TOKENS
    )
    tokenizer = processor.tokenizer
    hidden = 32
    config = Blip2Config(
        vision_config={
            "hidden_size": hidden,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "image_size": IMAGE_SIZE,
            "patch_size": 8,
        },
        qformer_config={
            "vocab_size": 64,
            "hidden_size": hidden,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 64,
            "encoder_hidden_size": hidden,
        },
        text_config={
            "model_type": "opt",
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "word_embed_proj_dim": hidden,
            "ffn_dim": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 128,
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        },
        num_query_tokens=NUM_QUERY_TOKENS,
        image_token_index=tokenizer.convert_tokens_to_ids(processor.image_token.content),
    )
    torch.manual_seed(seed)
    Blip2ForConditionalGeneration(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
