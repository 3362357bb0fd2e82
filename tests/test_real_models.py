"""benchmarks/real_models.py builds the published architectures: the benchmark's FLOPs are the real models'.

Built on PyTorch's meta device (shapes, no memory, no weights) and counted against the
parameter counts of the released checkpoints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import real_models  # noqa: E402

pytestmark = pytest.mark.slow


def _parameters(module: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in module.parameters())


@pytest.mark.parametrize(
    ("shape", "unet", "text_encoder"),
    [
        (real_models.SD15, 859_520_964, 123_060_480),  # SD-1.5 UNet; CLIP ViT-L/14 text encoder
        (real_models.SD21, 865_910_724, 340_387_840),  # SD-2.1 UNet; OpenCLIP ViT-H text encoder
    ],
)
def test_stable_diffusion_has_the_released_parameter_counts(shape, unet, text_encoder):
    with torch.device("meta"):
        denoiser, vae, text = real_models.sd_models(**shape)
    assert (_parameters(denoiser), _parameters(vae), _parameters(text)) == (unet, 83_653_863, text_encoder)
    assert denoiser.config.sample_size * 8 == {64: 512, 96: 768}[shape["latent"]]


def test_blip2_and_clip_have_the_released_parameter_counts():
    with torch.device("meta"):
        blip2, processor = real_models.blip2_opt27()
        clip = real_models.clip_l14()
    assert _parameters(blip2.language_model) == 2_651_596_800  # facebook/opt-2.7b
    assert _parameters(blip2.vision_model) == 985_952_256  # EVA ViT-g/14, the 39 layers BLIP-2 keeps
    assert round(_parameters(blip2) / 1e9, 2) == 3.74  # Salesforce/blip2-opt-2.7b
    assert processor.num_query_tokens == blip2.config.num_query_tokens == 32
    assert _parameters(clip) == 427_616_513  # openai/clip-vit-large-patch14
