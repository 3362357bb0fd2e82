"""``diffusers:<hub id or folder>``: any diffusers text-to-image pipeline.

Loaded through ``AutoPipelineForText2Image.from_pretrained`` in float16 on CUDA and
float32 on CPU. The pipeline's models (UNet, VAE, text encoder, safety checker) are loaded
one by one first, each with its loading report, so a checkpoint with missing or
mismatched tensors is refused instead of silently running with random layers. A batch
of items is one pipeline call with one CPU ``torch.Generator`` per item, seeded with the
item's seed: the starting noise of image i depends only on its seed, not on the device
or on which other prompts share the batch (paired seeds).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.registry import Spec
from auditor.core.weights import (
    LoadOptions,
    check_complete,
    device_kind,
    dtype_keyword,
    explain_load_errors,
    hub_options,
    loaded_model_ref,
    loading_problems,
    quiet_libraries,
)
from auditor.generation.base import GeneratedPicture, GenerationItem
from auditor.records import GenerationSettings, ModelRef

_WHAT = "text-to-image"
_HINT = "pass --t2i diffusers:/path/to/local/copy"


class DiffusersTextToImage:
    """A loaded diffusers pipeline and the settings every image is made with."""

    seeded = True

    def __init__(self, pipeline: Any, ref: ModelRef, settings: GenerationSettings):
        self.pipeline = pipeline
        self.ref = ref
        #: The settings in effect, defaults resolved (scheduler class, steps, guidance, size).
        self.settings = settings

    @property
    def scheduler_name(self) -> str:
        """Class name of the scheduler in use, e.g. ``'PNDMScheduler'``."""
        return type(self.pipeline.scheduler).__name__

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(
            self.ref.fingerprint,
            dtype=self.ref.dtype,
            device=device_kind(self.ref.device),
            **self.settings.model_dump(exclude={"batch_size"}),
        )

    def generate(self, items: Sequence[GenerationItem]) -> list[GeneratedPicture]:
        """One pipeline call per ``batch_size`` items, with each item's own seeded generator."""
        import torch

        pictures: list[GeneratedPicture] = []
        size = self.settings.batch_size
        for start in range(0, len(items), size):
            batch = items[start : start + size]
            with torch.inference_mode():
                output = self.pipeline(**self.pipeline_arguments(batch))
            pictures += self.pictures(output, len(batch))
        return pictures

    def pipeline_arguments(self, batch: Sequence[GenerationItem]) -> dict[str, Any]:
        """The pipeline call for one batch: its prompts, one seeded CPU generator per item, the settings.

        Traced generation (:mod:`auditor.generation.tracing`) calls the pipeline with these
        same arguments, so it makes the same images as :meth:`generate`.
        """
        import torch

        options: dict[str, Any] = {
            "prompt": [item.prompt for item in batch],
            "generator": [torch.Generator("cpu").manual_seed(item.seed) for item in batch],
            "num_inference_steps": self.settings.steps,
            "guidance_scale": self.settings.guidance_scale,
            "width": self.settings.width,
            "height": self.settings.height,
            "output_type": "pil",
        }
        if self.settings.negative_prompt is not None:
            options["negative_prompt"] = [self.settings.negative_prompt] * len(batch)
        return {k: v for k, v in options.items() if v is not None}

    @staticmethod
    def pictures(output: Any, count: int) -> list[GeneratedPicture]:
        """The ``count`` images of a pipeline output, flagged where the safety checker blacked them out."""
        flags = getattr(output, "nsfw_content_detected", None) or [False] * count
        return [GeneratedPicture(image=image, flagged_nsfw=bool(flag)) for image, flag in zip(output.images, flags)]

def load(spec: Spec, settings: GenerationSettings, options: LoadOptions = LoadOptions()) -> DiffusersTextToImage:
    """Load the pipeline named by ``spec.target`` and apply ``settings`` (scheduler, defaults)."""
    from auditor.core.devices import pick_device, pick_dtype

    model_id = spec.target
    if not model_id:
        raise AuditorError("the diffusers backend needs a model: --t2i diffusers:<hub id or folder>")
    device = pick_device(options.device)
    dtype = pick_dtype(device)
    with quiet_libraries("transformers", "diffusers"), explain_load_errors(_WHAT, model_id, _HINT):
        pipeline, partial = _load_pipeline(model_id, dtype, options)
    if settings.scheduler:
        pipeline.scheduler = _scheduler(pipeline, settings.scheduler)
    pipeline = pipeline.to(device)
    pipeline.set_progress_bar_config(disable=True)
    ref = loaded_model_ref(spec, "model_index.json", dtype, device, options, partial)
    return DiffusersTextToImage(pipeline, ref, _effective_settings(pipeline, settings))


def _load_pipeline(model_id: str, dtype: Any, options: LoadOptions) -> tuple[Any, list[str]]:
    """The pipeline, and what its models' loading reports found wrong with their checkpoints.

    Each model is loaded alone with its loading report; an incomplete one is refused by
    :func:`check_complete`, or, when partial weights are allowed, loaded again with its
    missing layers randomly initialised (diffusers' fast loading would leave them empty).
    """
    from diffusers import AutoPipelineForText2Image, DiffusionPipeline

    hub = hub_options(model_id)
    index = DiffusionPipeline.load_config(model_id, **hub)
    models: dict[str, Any] = {}
    problems: list[str] = []
    for name, entry in index.items():
        found = _model_class(entry) if not name.startswith("_") else None
        if found is None:
            continue
        cls, library = found
        arguments = {"subfolder": name, dtype_keyword(library): dtype, **hub}
        model, info = cls.from_pretrained(model_id, output_loading_info=True, **arguments)
        found_problems = check_complete(_WHAT, model_id, loading_problems(info, name), options)
        if found_problems and library == "diffusers":
            model = cls.from_pretrained(model_id, low_cpu_mem_usage=False, **arguments)
        models[name] = model
        problems += found_problems
    pipeline = AutoPipelineForText2Image.from_pretrained(model_id, **models, **{dtype_keyword("diffusers"): dtype}, **hub)
    return pipeline, problems


def _model_class(entry: Any) -> tuple[type, str] | None:
    """``(class, library)`` of a ``model_index.json`` entry that holds weights (a torch module), else None.

    Entries name ``[library, class]``: ``diffusers``, ``transformers`` or a diffusers
    pipeline module such as ``stable_diffusion`` (its safety checker).
    """
    import importlib

    import torch

    if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, str) for part in entry)):
        return None
    library, class_name = entry
    module_name = library if library in ("diffusers", "transformers") else f"diffusers.pipelines.{library}"
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        return None  # the pipeline's own loading reports what it cannot find
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module) and hasattr(cls, "from_pretrained")):
        return None
    from diffusers import ModelMixin

    return cls, "diffusers" if issubclass(cls, ModelMixin) else "transformers"


def _scheduler(pipeline: Any, name: str) -> Any:
    """A scheduler of class ``name`` configured from the pipeline's own scheduler config."""
    import diffusers

    cls = getattr(diffusers, name, None)
    if not (inspect.isclass(cls) and issubclass(cls, diffusers.SchedulerMixin)):
        compatible = sorted(c.__name__ for c in pipeline.scheduler.compatibles)
        raise AuditorError(f"unknown scheduler {name!r}: use one of {', '.join(compatible)}")
    return cls.from_config(pipeline.scheduler.config)


def _effective_settings(pipeline: Any, settings: GenerationSettings) -> GenerationSettings:
    """``settings`` with the pipeline's defaults filled in, so the record says what actually ran."""
    defaults = inspect.signature(pipeline.__call__).parameters
    size = _default_size(pipeline)

    def default(name: str) -> Any:
        parameter = defaults.get(name)
        return None if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default

    return settings.model_copy(
        update={
            "scheduler": type(pipeline.scheduler).__name__,
            "steps": settings.steps if settings.steps is not None else default("num_inference_steps"),
            "guidance_scale": settings.guidance_scale
            if settings.guidance_scale is not None
            else default("guidance_scale"),
            "width": settings.width or size,
            "height": settings.height or size,
        }
    )


def _default_size(pipeline: Any) -> int | None:
    """The image side the pipeline makes by default (latent sample size x VAE scale), when it says."""
    base = getattr(pipeline, "default_sample_size", None)
    if base is None and getattr(pipeline, "unet", None) is not None:
        base = getattr(pipeline.unet.config, "sample_size", None)
    scale = getattr(pipeline, "vae_scale_factor", None)
    return base * scale if isinstance(base, int) and isinstance(scale, int) else None
