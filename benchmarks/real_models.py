"""Real-size model architectures with random weights, for benchmarks on a GPU.

No weights can be downloaded here, but the cost of a forward pass depends on the
architecture, not on the values of the weights. These builders make Stable Diffusion
1.5 and 2.1, BLIP-2 OPT-2.7b and CLIP ViT-L/14 from their published shapes with random
weights (tokenizers come from ``auditor.tiny``) and save them with ``save_pretrained``,
so auditor's backends load them through the same ``from_pretrained`` path real
checkpoints take. Every builder writes float16 weights.
"""

from __future__ import annotations

from pathlib import Path

#: The published shapes that set each model's FLOPs (``sd_models``' arguments).
SD15 = {"latent": 64, "text_width": 768, "text_layers": 12, "text_heads": 12, "unet": {"attention_head_dim": 8}}
SD21 = {"latent": 96, "text_width": 1024, "text_layers": 23, "text_heads": 16,
        "unet": {"attention_head_dim": (5, 10, 20, 20), "use_linear_projection": True}}  # fmt: skip


def build_sd15(folder: Path, device: str = "cuda") -> None:
    """Stable Diffusion 1.5: UNet (860M, 64x64 latents = 512 px), VAE, CLIP ViT-L/14 text encoder; PNDM."""
    from diffusers import PNDMScheduler

    scheduler = PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True,
                              set_alpha_to_one=False, steps_offset=1)  # SD-1.5's own scheduler config
    _save_sd(folder, device, scheduler, **SD15)


def build_sd21(folder: Path, device: str = "cuda") -> None:
    """Stable Diffusion 2.1 (the TIBET paper's model): UNet (865M, 96x96 latents = 768 px, linear
    projections, head widths 5/10/20/20), VAE, OpenCLIP ViT-H text encoder (1024 wide, 23 layers);
    DDIM with v-prediction."""
    from diffusers import DDIMScheduler

    scheduler = DDIMScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", prediction_type="v_prediction",
        clip_sample=False, set_alpha_to_one=False, steps_offset=1,
    )  # fmt: skip
    _save_sd(folder, device, scheduler, **SD21)


def _save_sd(folder: Path, device: str, scheduler, **shape) -> None:
    import torch
    from diffusers import StableDiffusionPipeline

    from auditor.tiny.tokenizers import clip_tokenizer

    with torch.device(device):
        denoiser, vae, text_encoder = sd_models(**shape)
    pipeline = StableDiffusionPipeline(
        unet=denoiser, vae=vae, text_encoder=text_encoder, tokenizer=clip_tokenizer(), scheduler=scheduler,
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip
    pipeline.to(torch.float16).save_pretrained(folder)


def sd_models(latent: int, text_width: int, text_layers: int, text_heads: int, unet: dict) -> tuple:
    """UNet, VAE and CLIP text encoder of a Stable Diffusion 1.x/2.x model, on the default device."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    denoiser = UNet2DConditionModel(sample_size=latent, cross_attention_dim=text_width, **unet)
    vae = AutoencoderKL(
        block_out_channels=(128, 256, 512, 512),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        layers_per_block=2,
        latent_channels=4,
        sample_size=latent * 8,
    )
    text_encoder = CLIPTextModel(
        CLIPTextConfig(vocab_size=49408, hidden_size=text_width, intermediate_size=4 * text_width,
                       num_hidden_layers=text_layers, num_attention_heads=text_heads, max_position_embeddings=77)
    )  # fmt: skip
    return denoiser, vae, text_encoder


def build_blip2_opt27(folder: Path, device: str = "cuda") -> None:
    """BLIP-2 with the ViT-g vision tower, Q-Former and OPT-2.7b (3.74B parameters), in float16."""
    import torch

    torch.set_default_dtype(torch.float16)
    try:
        with torch.device(device):
            model, processor = blip2_opt27()
    finally:
        torch.set_default_dtype(torch.float32)
    model.eval().save_pretrained(folder)
    processor.save_pretrained(folder)


def blip2_opt27() -> tuple:
    """BLIP-2 OPT-2.7b and its processor, on the default device and dtype."""
    from transformers import Blip2Config, Blip2ForConditionalGeneration, Blip2Processor, BlipImageProcessor

    from auditor.tiny.tokenizers import opt_tokenizer

    processor = Blip2Processor(
        image_processor=BlipImageProcessor(size={"height": 224, "width": 224}), tokenizer=opt_tokenizer(), num_query_tokens=32
    )
    tokenizer = processor.tokenizer
    config = Blip2Config(
        vision_config={"hidden_size": 1408, "intermediate_size": 6144, "num_hidden_layers": 39,
                       "num_attention_heads": 16, "image_size": 224, "patch_size": 14},
        qformer_config={"encoder_hidden_size": 1408},
        text_config={"model_type": "opt", "vocab_size": 50272, "hidden_size": 2560, "word_embed_proj_dim": 2560,
                     "ffn_dim": 10240, "num_hidden_layers": 32, "num_attention_heads": 32,
                     "max_position_embeddings": 2048, "pad_token_id": tokenizer.pad_token_id,
                     "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id},
        num_query_tokens=32,
        image_token_index=tokenizer.convert_tokens_to_ids(processor.image_token.content),
    )  # fmt: skip
    return Blip2ForConditionalGeneration(config), processor


def build_clip_l14(folder: Path, device: str = "cuda") -> None:
    """CLIP ViT-L/14 (428M parameters), in float16."""
    import torch
    from transformers import CLIPImageProcessor, CLIPProcessor

    from auditor.tiny.tokenizers import clip_tokenizer

    with torch.device(device):
        model = clip_l14()
    model.to(torch.float16).eval().save_pretrained(folder)
    image_processor = CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})
    CLIPProcessor(image_processor=image_processor, tokenizer=clip_tokenizer()).save_pretrained(folder)


def clip_l14():
    """CLIP ViT-L/14, on the default device."""
    from transformers import CLIPConfig, CLIPModel

    config = CLIPConfig(
        text_config={"vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                     "num_attention_heads": 12, "max_position_embeddings": 77},
        vision_config={"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                       "num_attention_heads": 16, "image_size": 224, "patch_size": 14},
        projection_dim=768,
    )  # fmt: skip
    return CLIPModel(config)
