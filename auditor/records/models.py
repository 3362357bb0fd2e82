"""Which models ran and with which settings: the part of a record that decides every number."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from auditor.core.choices import CasNormalization, IntervalMethod
from auditor.records.record import Record


class ModelRef(Record):
    """Which model produced a stage's output, precisely enough to get it again."""

    spec: str = Field(
        description="Backend spec, e.g. 'diffusers:stabilityai/stable-diffusion-2-1': as given, except that a local "
        "path in it is recorded absolute (kept as given for a Ray cluster, whose workers have their own paths)."
    )
    backend: str = Field(description="Registry prefix of the backend that ran, e.g. 'diffusers', 'blip2', 'clip'.")
    model_id: str | None = Field(default=None, description="Hub id or local path of the weights, when there are any.")
    revision: str | None = Field(default=None, description="Hub commit of the weights when known.")
    fingerprint: str | None = Field(
        default=None,
        description="Content identity of the weights, the model part of cache keys: the hub commit for a hub "
        "snapshot, sha256 over every config and weight file's contents for a local folder.",
    )
    dtype: str | None = Field(default=None, description="Torch dtype the model ran in, e.g. 'float16'.")
    device: str | None = Field(default=None, description="Device the model ran on, e.g. 'cuda:0' or 'cpu'.")
    service: str | None = Field(
        default=None,
        description="Base URL of the API that served a hosted model (openai: specs), without credentials or query.",
    )
    partial_weights: list[str] = Field(
        default_factory=list,
        description="Tensors the checkpoint lacked, had in excess or had in another shape ('missing unet.x.weight'), "
        "loaded anyway because the run allowed partial weights; those layers were randomly initialised. "
        "Empty for a complete checkpoint.",
    )


#: Image sides are multiples of this: latent diffusion pipelines refuse other sizes (the VAE's 8x8 pixel blocks).
SIDE_MULTIPLE = 8


class GenerationSettings(Record):
    """Text-to-image settings that change the images (and so every number after them)."""

    steps: int | None = Field(default=None, description="Denoising steps; None = the pipeline's default.")
    guidance_scale: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Classifier-free guidance scale; None = default."
    )
    scheduler: str | None = Field(default=None, description="Scheduler class name used, e.g. 'DPMSolverMultistepScheduler'.")
    width: int | None = Field(
        default=None, ge=8, multiple_of=SIDE_MULTIPLE, description="Image width in pixels; None = the model's default."
    )
    height: int | None = Field(
        default=None, ge=8, multiple_of=SIDE_MULTIPLE, description="Image height in pixels; None = the model's default."
    )
    negative_prompt: str | None = Field(default=None, description="Negative prompt given to every generation.")
    batch_size: int = Field(default=4, ge=1, description="Images generated per forward pass (does not change images).")
    batch_size_auto: bool = Field(
        default=False,
        description="batch_size was found by --batch-size auto: the largest batch that fits on the device, probed "
        "once per model, device and executor and remembered in the content cache.",
    )
    compile: bool = Field(
        default=False,
        description="--compile was given: torch.compile of the UNet (or transformer) and the VAE decoder; "
        "whether it ran is in optimizations (it falls back to eager modules where it cannot compile).",
    )
    optimizations: list[str] = Field(
        default_factory=list,
        description="Speed-ups that ran, each changing images only within floating-point noise (like the batch "
        "size): 'fused_qkv', 'channels_last', 'sdpa', 'torch.compile:<mode>'. Empty in runs recorded before "
        "they were recorded.",
    )

    #: Fields that change how fast images are made, not which images: recorded, but no part of cache keys.
    SPEED_ONLY: ClassVar[frozenset[str]] = frozenset({"batch_size", "batch_size_auto", "compile", "optimizations"})
    #: The others, which change which images are made, each with the command-line option that sets it.
    IMAGE_OPTIONS: ClassVar[dict[str, str]] = {
        "steps": "--steps", "guidance_scale": "--guidance", "scheduler": "--scheduler", "width": "--width",
        "height": "--height", "negative_prompt": "--negative-prompt",
    }  # fmt: skip


class PerceptionSettings(Record):
    """VQA settings: greedy decoding with a short answer budget."""

    max_new_tokens: int = Field(default=20, ge=1, description="Answer length limit in tokens.")
    caption_max_new_tokens: int = Field(default=40, ge=1, description="Caption length limit in tokens.")
    batch_size: int = Field(default=16, ge=1, description="Image-question pairs per forward pass.")
    temperature: float = Field(
        default=0.0,
        ge=0,
        description="Sampling temperature sent to an API VQA model (openai:); local models always decode greedily, as at 0.",
    )
    instructions: str | None = Field(
        default=None,
        description="System message sent with every short-answer question to an API VQA model (openai:); "
        "None = auditor's default, recorded as sent once the model is loaded; unused by local models.",
    )
    caption_instructions: str | None = Field(
        default=None,
        description="System message sent with the caption question to an API VQA model (openai:); "
        "None = auditor's default, recorded as sent once the model is loaded; unused by local models.",
    )
    concurrency: int = Field(
        default=8, ge=1, description="Requests in flight at once to an API VQA model (openai:); does not change answers."
    )


class ScoringSettings(Record):
    """Settings of the concept and score computation."""

    cas_normalization: CasNormalization = Field(
        default="distribution",
        description="'distribution': histograms rescaled to sum 1 before the IoU (authors' code); "
        "'frequency': per-image frequencies as in the paper's Eq. 1-3.",
    )
    min_frequency: float = Field(default=0.01, ge=0, description="Concepts with a lower per-image frequency are dropped.")
    top_k: int = Field(default=10, ge=1, description="How many concepts the top-K lists keep.")
    include_captions: bool = Field(default=True, description="Whether captions count towards the concept histograms.")
    permutations: int = Field(default=10_000, ge=1, description="Monte Carlo permutations for T2IAT p-values.")
    permutation_seed: int = Field(default=0, ge=0, description="Seed of the permutation generator.")
    bootstrap: int = Field(
        default=1000,
        ge=0,
        description="Paired-bootstrap resamples over seeds behind every interval (--bootstrap); 0 = no intervals.",
    )
    ci_level: float = Field(default=0.95, gt=0, lt=1, description="Coverage of every interval.")
    ci_method: IntervalMethod = Field(
        default="percentile",
        description="'percentile', or 'bca' (bias-corrected and accelerated; falls back to percentile, "
        "noted, where it degenerates).",
    )
    ci_seed: int = Field(default=0, ge=0, description="Seed of the bootstrap's resampling (--ci-seed).")
    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="A T2IAT direction is stated only when its Holm-adjusted p-value (across the run's axes) "
        "is below alpha (--alpha).",
    )
