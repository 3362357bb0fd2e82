"""Tiny randomly initialised vision backbones, open-vocabulary detectors and SAM, saved like hub checkpoints.

Same architectures and processors as the real ones prompt-to-image tracing uses
(``facebook/dinov2-*``, DINO ViTs, ``IDEA-Research/grounding-dino-*``,
``google/owlv2-*``, ``facebook/sam-vit-*``), shrunk to a few thousand parameters and 32 to
64 px inputs, so ``from_pretrained(folder)`` and the processors run unchanged. Their
outputs are random.
"""

from __future__ import annotations

from pathlib import Path

from auditor.tiny.clip import clip_text_config
from auditor.tiny.tokenizers import bert_tokenizer, clip_tokenizer

#: Side of the square images the tiny backbones and detectors take.
IMAGE_SIZE = 32
#: SAM's image side (its processor pads every image to this square).
SAM_IMAGE_SIZE = 64
#: Detection slots of the tiny Grounding DINO.
GROUNDING_DINO_QUERIES = 10


def _vit_layers() -> dict:
    """The shared size of the tiny ViT-style encoders."""
    return {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "image_size": IMAGE_SIZE,
        "patch_size": 8,
    }


def build_dinov2(folder: Path, seed: int) -> None:
    """Save a ``Dinov2Model`` and its ``BitImageProcessor`` (DINOv2's) into ``folder``."""
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    torch.manual_seed(seed)
    Dinov2Model(Dinov2Config(**_vit_layers())).eval().save_pretrained(folder)
    BitImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    ).save_pretrained(folder)


def build_vit_without_pooler(folder: Path, seed: int) -> None:
    """Save a ``ViTModel`` without pooler weights, as self-supervised DINO ViT checkpoints are."""
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(seed)
    ViTModel(ViTConfig(**_vit_layers()), add_pooling_layer=False).eval().save_pretrained(folder)
    ViTImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}).save_pretrained(folder)


def build_grounding_dino(folder: Path, seed: int) -> None:
    """Save a ``GroundingDinoForObjectDetection`` (Swin backbone, BERT text side) and its processor."""
    import torch
    from transformers import (
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
    )

    tokenizer = bert_tokenizer()
    config = GroundingDinoConfig(
        backbone_config={
            "model_type": "swin",
            "embed_dim": 8,
            "depths": [1, 1],
            "num_heads": [1, 1],
            "window_size": 2,
            "image_size": IMAGE_SIZE,
            "patch_size": 4,
            "out_features": ["stage1", "stage2"],
        },
        text_config={
            "model_type": "bert",
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 32,
            "max_position_embeddings": 64,
        },
        # d_model must be a multiple of 32 (the input projections' group norms).
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,  # the box heads of decoder layers > 0 are tied to layer 0's
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_n_points=2,
        decoder_n_points=2,
        num_feature_levels=2,
        num_queries=GROUNDING_DINO_QUERIES,
        max_text_len=64,
    )
    torch.manual_seed(seed)
    GroundingDinoForObjectDetection(config).eval().save_pretrained(folder)
    image_processor = GroundingDinoImageProcessor(size={"shortest_edge": IMAGE_SIZE, "longest_edge": IMAGE_SIZE})
    GroundingDinoProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)


def build_owlv2(folder: Path, seed: int) -> None:
    """Save an ``Owlv2ForObjectDetection`` and its processor (CLIP-style tokenizer padding with ``"!"``)."""
    import torch
    from transformers import Owlv2Config, Owlv2ForObjectDetection, Owlv2ImageProcessor, Owlv2Processor

    tokenizer = clip_tokenizer(model_max_length=16, pad_token="!")
    config = Owlv2Config(
        text_config=clip_text_config(tokenizer),
        vision_config=_vit_layers(),
        projection_dim=32,  # the class head compares image features with text embeddings of this width
    )
    torch.manual_seed(seed)
    Owlv2ForObjectDetection(config).eval().save_pretrained(folder)
    image_processor = Owlv2ImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    Owlv2Processor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)


def build_sam(folder: Path, seed: int) -> None:
    """Save a ``SamModel`` (ViT image encoder, prompt encoder, mask decoder) and its ``SamProcessor``."""
    import torch
    from transformers import SamConfig, SamImageProcessor, SamModel, SamProcessor

    patch = 8
    config = SamConfig(
        vision_config={
            "hidden_size": 32,
            "output_channels": 16,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": SAM_IMAGE_SIZE,
            "patch_size": patch,
            "window_size": 4,
            "global_attn_indexes": [1],
            "num_pos_feats": 8,
            "mlp_dim": 64,
        },
        prompt_encoder_config={
            "hidden_size": 16,
            "image_size": SAM_IMAGE_SIZE,
            "patch_size": patch,
            "mask_input_channels": 4,
        },
        mask_decoder_config={
            "hidden_size": 16,
            "mlp_dim": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "iou_head_hidden_dim": 16,
        },
    )
    torch.manual_seed(seed)
    SamModel(config).eval().save_pretrained(folder)
    image_processor = SamImageProcessor(
        size={"longest_edge": SAM_IMAGE_SIZE}, pad_size={"height": SAM_IMAGE_SIZE, "width": SAM_IMAGE_SIZE}
    )
    SamProcessor(image_processor=image_processor).save_pretrained(folder)
