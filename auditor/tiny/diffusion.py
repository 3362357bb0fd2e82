"""A tiny randomly initialised Stable Diffusion pipeline saved as a diffusers folder.

Same components as a Stable Diffusion 1.x/2.x checkpoint (UNet2DConditionModel,
AutoencoderKL, CLIP text encoder and tokenizer, PNDM scheduler, no safety checker), so
``AutoPipelineForText2Image.from_pretrained`` loads it exactly like a real one. Latents
are 16x16 and the VAE upsamples twice: 32 px images in a few milliseconds per step.
"""

from __future__ import annotations

from pathlib import Path

from auditor.tiny.tokenizers import clip_tokenizer

LATENT_SIZE = 16
CROSS_ATTENTION_DIM = 32


def build_diffusion(folder: Path, seed: int) -> None:
    """Save a ``StableDiffusionPipeline`` into ``folder`` (``model_index.json`` + one folder per component)."""
    _build_pipeline(folder, seed, ("DownBlock2D", "CrossAttnDownBlock2D"), ("CrossAttnUpBlock2D", "UpBlock2D"), 4)


def build_tracing_diffusion(folder: Path, seed: int) -> None:
    """The same kind of pipeline with cross-attention at both UNet resolutions (16x16 and 8x8 latents), as
    real Stable Diffusion has at four, and 2 heads at the first and 4 at the second (SD 2.x also varies them),
    so that tracing's tests see resolutions combined and heads summed."""
    cross_attention = ("CrossAttnDownBlock2D", "CrossAttnDownBlock2D"), ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D")
    _build_pipeline(folder, seed, *cross_attention, (2, 4))


def _build_pipeline(
    folder: Path, seed: int, down_blocks: tuple[str, ...], up_blocks: tuple[str, ...], heads: int | tuple[int, ...]
) -> None:
    import torch
    from diffusers import (
        AutoencoderKL,
        PNDMScheduler,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    tokenizer = clip_tokenizer()
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=LATENT_SIZE,
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=down_blocks,
        up_block_types=up_blocks,
        cross_attention_dim=CROSS_ATTENTION_DIM,
        attention_head_dim=heads,
        norm_num_groups=4,
    )
    torch.manual_seed(seed + 1)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        norm_num_groups=4,
        sample_size=LATENT_SIZE * 2,
    )
    torch.manual_seed(seed + 2)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(tokenizer),
            hidden_size=CROSS_ATTENTION_DIM,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=tokenizer.model_max_length,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    )
    scheduler = PNDMScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True, steps_offset=1
    )
    pipeline = StableDiffusionPipeline(
        unet=unet.eval(),
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipeline.save_pretrained(folder)
