"""``diffusers:<hub id or folder>``: any diffusers text-to-image pipeline.

Loaded through ``AutoPipelineForText2Image.from_pretrained`` in float16 on CUDA and
float32 on CPU. The pipeline's models (UNet, VAE, text encoder, safety checker) are loaded
one by one first, each with its loading report, so a checkpoint with missing or
mismatched tensors is refused instead of silently running with random layers. A batch
of items is one pipeline call with one CPU ``torch.Generator`` per item, seeded with the
item's seed: the starting noise of image i depends only on its seed, not on the device
or on which other prompts share the batch (paired seeds).

Speed-ups that change images only within floating-point noise (as the batch size does):
on CUDA the attention projections are fused (one QKV matrix product) and the UNet and
VAE use the channels-last memory layout; attention runs through PyTorch's SDPA (flash
attention where it applies), diffusers' default. ``--compile`` adds ``torch.compile`` of
the UNet (or transformer) and the VAE decoder, and falls back to eager modules with a
notice where it cannot compile. The speed-ups that ran are recorded in the settings'
``optimizations``; none of them is part of the cache key, so a compiled run reuses the
images an eager one made. ``--batch-size auto`` probes the largest batch that fits
(:meth:`DiffusersTextToImage.probe_batch_size`).
"""

from __future__ import annotations

import inspect
import logging
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from auditor.core.errors import AuditorError, BackendError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.registry import Spec
from auditor.core.weights import (
    LoadOptions,
    check_complete,
    device_kind,
    dtype_keyword,
    hub_options,
    is_load_failure,
    loaded_model_ref,
    loading_model,
    loading_problems,
    weights_identity,
)
from auditor.generation.base import GeneratedPicture, GenerationItem
from auditor.generation.registry import PIPELINE_FOLDER
from auditor.records import GenerationSettings, ModelRef
from auditor.records.models import SIDE_MULTIPLE

_WHAT = "text-to-image"
_HINT = "pass --t2i diffusers:/path/to/local/copy"
#: The file at the root of every diffusers pipeline folder.
_MARKER = PIPELINE_FOLDER.marker
#: torch.compile mode of --compile: fused pointwise kernels around cuBLAS/cuDNN, no autotuning, no CUDA
#: graphs (whose capture the pipeline's Python-side scheduler steps would split). Not max-autotune: on an
#: H100 (README, Performance, 2026-11-24) it spent about 9 s timing 18 candidates for each convolution
#: shape of SD 1.5's UNet, cuDNN's own kernel won both shapes the log kept, and it had not finished
#: compiling within the 6 minutes left in its command: longer than the audit it was to speed up.
COMPILE_MODE = "default"
#: A tokenizer's ``model_max_length`` above this is transformers' "not set" (about 1e30), not a real window.
MAX_KNOWN_WINDOW = 1 << 20
#: Denoising steps of the short pipeline calls that probe a batch size or warm a compiled model up.
PROBE_STEPS = 2
#: The largest batch ``--batch-size auto`` tries on a GPU (the paper's 48 images of a prompt set fit in one).
AUTO_BATCH_CAP_GPU = 64
#: On a CPU larger batches do not make images faster and memory is rarely the limit: auto tries up to 4.
AUTO_BATCH_CAP_CPU = 4
#: A batch whose probe used more than this share of GPU memory is not taken (the other stages' models,
#: allocator fragmentation and longer prompts need the rest).
MEMORY_HEADROOM = 0.8
#: Generation settings that change how many denoising steps run and how, not the memory one step takes.
_STEP_COUNT_ONLY = frozenset({"steps", "scheduler"})


class DiffusersTextToImage:
    """A loaded diffusers pipeline and the settings every image is made with."""

    seeded = True

    def __init__(self, pipeline: Any, ref: ModelRef, settings: GenerationSettings):
        self.pipeline = pipeline
        self.ref = ref
        #: The settings in effect, defaults resolved (scheduler class, steps, guidance, size).
        self.settings = settings

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(
            self.ref.fingerprint,
            dtype=self.ref.dtype,
            device=device_kind(self.ref.device),
            **self.settings.model_dump(exclude=GenerationSettings.SPEED_ONLY),
        )

    def generate(self, items: Sequence[GenerationItem]) -> list[GeneratedPicture]:
        """One pipeline call per ``batch_size`` items, with each item's own seeded generator.

        A compiled model gets full batches only (the last one padded with copies of its
        last item, whose images are dropped): a new batch shape would compile again.
        """
        pictures: list[GeneratedPicture] = []
        size = self.settings.batch_size
        for start in range(0, len(items), size):
            batch = list(items[start : start + size])
            padded = batch + [batch[-1]] * (size - len(batch)) if self._compiled else batch
            pictures += self._call(padded, self.settings.steps)[: len(batch)]
        return pictures

    def prompt_words(self, prompts: Sequence[str]) -> list[list[str]]:
        """Each prompt's words (lower case) as the pipeline's tokenizer splits them: what tracing can map.

        A method of the model, so a study can ask a model loaded on a Ray worker too.
        """
        from auditor.generation.tracing import prompt_words

        tokenizer = getattr(self.pipeline, "tokenizer", None)
        if tokenizer is None:
            raise AuditorError(
                f"{type(self.pipeline).__name__} has no tokenizer, so its prompt words cannot be traced"
            )
        return [[word.text for word in prompt_words(tokenizer, prompt)] for prompt in prompts]

    def cut_prompts(self, prompts: Sequence[str]) -> list[tuple[str, str]]:
        """``(prompt, its end no text encoder reads)`` for each prompt longer than every tokenizer's window.

        CLIP encoders read 77 tokens; a counterfactual word beyond them would make the same images as the
        prompt without it, so the stage says so. A pipeline with a longer-reading encoder (T5) cuts less: at
        its ``max_sequence_length`` (SD3 256, Flux 512, PixArt-α 120), which the pipeline applies to that
        encoder's tokenizer, the one with the largest ``model_max_length``.
        """
        tokenizers = [
            tokenizer
            for name in ("tokenizer", "tokenizer_2", "tokenizer_3")
            if (tokenizer := getattr(self.pipeline, name, None)) is not None
        ]
        widest = max(tokenizers, key=lambda tokenizer: tokenizer.model_max_length, default=None)
        if widest is None:
            return []
        window = widest.model_max_length
        sequence = inspect.signature(self.pipeline.__call__).parameters.get("max_sequence_length")
        if sequence is not None and isinstance(sequence.default, int):
            window = min(window, sequence.default)
        if window > MAX_KNOWN_WINDOW:  # a tokenizer that does not say its length: nothing known to be cut
            return []

        def tokens(text: str) -> int:  # with the start and end-of-text tokens, which the window counts
            return len(widest(text, truncation=False, verbose=False).input_ids)

        return [(prompt, unread_end(prompt, window, tokens)) for prompt in prompts if tokens(prompt) > window]

    def _call(self, batch: Sequence[GenerationItem], steps: int | None) -> list[GeneratedPicture]:
        """One pipeline call for ``batch`` with ``steps`` denoising steps."""
        import torch

        with torch.inference_mode():
            output = self.pipeline(**self.pipeline_arguments(batch, steps))
        return self.pictures(output, len(batch))

    def pipeline_arguments(self, batch: Sequence[GenerationItem], steps: int | None = None) -> dict[str, Any]:
        """The pipeline call for one batch: its prompts, one seeded CPU generator per item, the settings.

        Traced generation (:mod:`auditor.generation.tracing`) calls the pipeline with these
        same arguments, so it makes the same images as :meth:`generate`. ``steps`` defaults
        to the run's (the batch-size probe asks for fewer).
        """
        import torch

        options: dict[str, Any] = {
            "prompt": [item.prompt for item in batch],
            "generator": [torch.Generator("cpu").manual_seed(item.seed) for item in batch],
            "num_inference_steps": self.settings.steps if steps is None else steps,
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

    # ------------------------------------------------------------------ speed

    _compiled = False

    @property
    def device_name(self) -> str:
        """The accelerator's name (e.g. 'NVIDIA H100 80GB HBM3'), or the device kind ('cpu')."""
        import torch

        device = torch.device(self.ref.device or "cpu")
        if device.type == "cuda":
            return torch.cuda.get_device_name(device)
        return device.type

    def batch_size_key(self) -> dict[str, Any]:
        """What the largest batch depends on: the weights, dtype and the settings that shape one denoising step
        (size, guidance, negative prompt), the device and the speed-ups.

        Not the number of steps or the scheduler: every step repeats the same forward passes, so a size found at
        25 steps holds at 50, and ``--steps`` does not probe again.
        """
        import torch

        device = torch.device(self.ref.device or "cpu")
        memory = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
        shape = self.settings.model_dump(exclude=GenerationSettings.SPEED_ONLY | _STEP_COUNT_ONLY)
        return {
            "model": settings_fingerprint(self.ref.fingerprint, dtype=self.ref.dtype, **shape),
            "device": self.device_name,
            "memory": memory,
            "optimizations": self.settings.optimizations,
        }

    def probe_batch_size(self) -> int:
        """The largest batch (a power of two up to the cap) a short pipeline call runs at without running out of memory.

        Top down: the cap first (:data:`AUTO_BATCH_CAP_GPU` on a GPU, :data:`AUTO_BATCH_CAP_CPU` on a CPU), halved
        while the call fails (out of memory, or a kernel that cannot take so large a batch) or, on a GPU, uses more
        than :data:`MEMORY_HEADROOM` of its memory; a batch of 1 is taken whenever it runs, and its error is
        raised. Where the cap fits (SD 1.5 on an 80 GB GPU) that is one call of 64
        images, where doubling up from 1 made seven calls and 127 images. Each probe is a real call (text encoder,
        UNet with guidance, VAE decoder, safety checker) at the run's size, :data:`PROBE_STEPS` steps.
        """
        import torch

        device = torch.device(self.ref.device or "cpu")
        on_gpu = device.type == "cuda"
        total = torch.cuda.get_device_properties(device).total_memory if on_gpu else 0
        item = GenerationItem(prompt="a photo of a person", index=0, seed=0)
        size = AUTO_BATCH_CAP_GPU if on_gpu else AUTO_BATCH_CAP_CPU
        while True:
            if on_gpu:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            try:
                self._call([item] * size, PROBE_STEPS)
            except (torch.OutOfMemoryError, MemoryError):
                fits = False
            except RuntimeError:  # a batch some kernel cannot take (past 32-bit indexing, say); 1 image must run
                if size == 1:
                    raise
                fits = False
            else:
                fits = size == 1 or not on_gpu or torch.cuda.max_memory_allocated(device) <= MEMORY_HEADROOM * total
            finally:
                if on_gpu:
                    torch.cuda.empty_cache()
            if fits:
                return size
            if size == 1:
                raise BackendError(f"{self.ref.spec}: not even one image fits in the memory of {self.device_name}")
            size //= 2

    def compile(self) -> str | None:
        """torch.compile the denoiser and the VAE decoder and warm them up; None when that worked.

        Where torch.compile is missing or fails (no compiler, an unsupported Python or
        platform), the eager modules are put back and the reason is returned: the run
        goes on as without ``--compile``.
        """
        import torch

        pipeline = self.pipeline
        name = "unet" if getattr(pipeline, "unet", None) is not None else "transformer"
        denoiser = getattr(pipeline, name, None)
        vae = getattr(pipeline, "vae", None)
        if denoiser is None:
            return "the pipeline has no UNet or transformer to compile"
        try:
            setattr(pipeline, name, torch.compile(denoiser, mode=COMPILE_MODE))
            if vae is not None:
                vae.decode = torch.compile(vae.decode, mode=COMPILE_MODE)
            item = GenerationItem(prompt="a photo of a person", index=0, seed=0)
            self._call([item] * self.settings.batch_size, PROBE_STEPS)  # compiles now, not in the first batch
        except Exception as exc:  # noqa: BLE001 - any failure means: run eagerly
            setattr(pipeline, name, denoiser)
            if vae is not None and "decode" in vars(vae):
                del vae.decode
            _reset_compiler()
            text = str(exc).strip().splitlines()
            return f"{type(exc).__name__}: {text[0] if text else 'no message'}"
        self._compiled = True
        self.settings = self.settings.model_copy(
            update={"optimizations": [*self.settings.optimizations, f"torch.compile:{COMPILE_MODE}"]}
        )
        return None


def _reset_compiler() -> None:
    """Forget what dynamo traced, so the eager modules run without its hooks."""
    try:
        import torch._dynamo

        torch._dynamo.reset()
    except Exception:  # noqa: BLE001 - nothing to reset where dynamo itself is missing
        pass


def speed_ups(pipeline: Any, device: str) -> list[str]:
    """Apply the speed-ups that change images only within floating-point noise; name those in effect.

    Fused QKV projections and channels-last on CUDA (on a CPU they do not pay); 'sdpa' is
    named when every attention processor runs through PyTorch's scaled-dot-product attention.
    """
    import torch

    applied: list[str] = []
    if device.startswith("cuda"):
        fused = False
        for name in ("unet", "transformer", "vae"):
            model = getattr(pipeline, name, None)
            if model is not None and hasattr(model, "fuse_qkv_projections"):
                try:
                    model.fuse_qkv_projections()
                    fused = True
                except (ValueError, AttributeError, NotImplementedError):
                    pass  # e.g. added-KV attention: this model keeps separate projections
        if fused:
            applied.append("fused_qkv")
        convolutional = [getattr(pipeline, name, None) for name in ("unet", "vae")]
        if any(model is not None for model in convolutional):
            for model in convolutional:
                if model is not None:
                    model.to(memory_format=torch.channels_last)
            applied.append("channels_last")
    processors = [
        processor
        for name in ("unet", "transformer")
        for processor in getattr(getattr(pipeline, name, None), "attn_processors", {}).values()
    ]
    if processors and all("2_0" in type(processor).__name__ for processor in processors):
        applied.append("sdpa")
    return applied


def load(spec: Spec, settings: GenerationSettings, options: LoadOptions = LoadOptions()) -> DiffusersTextToImage:
    """Load the pipeline named by ``spec.target`` and apply ``settings`` (scheduler, defaults)."""
    from auditor.core.devices import pick_device, pick_dtype

    model_id = spec.target
    if not model_id:
        raise AuditorError("the diffusers backend needs a model: --t2i diffusers:<hub id or folder>")
    device = pick_device(options.device)
    dtype = pick_dtype(device)
    with loading_model(_WHAT, model_id, _HINT, ("transformers", "diffusers")):
        pipeline, partial = _load_pipeline(model_id, dtype, options)
    _check_sides(pipeline, settings, spec)
    if settings.scheduler:
        pipeline.scheduler = _scheduler(pipeline, settings.scheduler)
    pipeline = pipeline.to(device)
    pipeline.set_progress_bar_config(disable=True)
    drop_cut_prompt_logs()
    applied = speed_ups(pipeline, device)
    ref = loaded_model_ref(spec, _MARKER, dtype, device, options, partial)
    effective = _effective_settings(pipeline, settings).model_copy(update={"optimizations": applied})
    return DiffusersTextToImage(pipeline, ref, effective)


#: How diffusers and transformers log a prompt longer than the text encoder reads. auditor says it once per
#: prompt in its own notice (:meth:`DiffusersTextToImage.cut_prompts`, silent with ``--quiet``), so these go.
CUT_PROMPT_LOG_LINES = ("The following part of your input was truncated", "Token indices sequence length is longer")


class _DropCutPromptLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(CUT_PROMPT_LOG_LINES)


def drop_cut_prompt_logs() -> None:
    """Keep :data:`CUT_PROMPT_LOG_LINES` off the terminal: filter the libraries' own log handlers (once)."""
    for library in ("diffusers", "transformers"):
        for handler in logging.getLogger(library).handlers:
            if not any(isinstance(f, _DropCutPromptLines) for f in handler.filters):
                handler.addFilter(_DropCutPromptLines())


def identify(spec: Spec, options: LoadOptions = LoadOptions()) -> str | None:
    """What :func:`load` would read, told without loading (:func:`~auditor.core.weights.weights_identity`)."""
    return weights_identity(spec, _MARKER, options, "diffusers")


def _check_sides(pipeline: Any, settings: GenerationSettings, spec: Spec) -> None:
    """--width and --height the pipeline can make: multiples of its VAE's scale factor and of 8, which the
    pipelines' own input checks ask whatever the VAE (a small VAE's factor is less)."""
    factor = getattr(pipeline, "vae_scale_factor", None)
    multiple = math.lcm(SIDE_MULTIPLE, factor) if isinstance(factor, int) and factor > 0 else SIDE_MULTIPLE
    for option, side in (("--width", settings.width), ("--height", settings.height)):
        if side is not None and side % multiple:
            raise AuditorError(f"{option} {side}: {spec} makes images whose sides are multiples of {multiple}")


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
        try:
            model, info = cls.from_pretrained(model_id, output_loading_info=True, **arguments)
        except Exception as exc:
            if not is_load_failure(exc):
                raise
            raise OSError(f"its {name}/ {_component_problem(model_id, name, exc)}") from exc
        found_problems = check_complete(_WHAT, model_id, loading_problems(info, name), options)
        if found_problems and library == "diffusers":
            model = cls.from_pretrained(model_id, low_cpu_mem_usage=False, **arguments)
        models[name] = model
        problems += found_problems
    pipeline = AutoPipelineForText2Image.from_pretrained(model_id, **models, **{dtype_keyword("diffusers"): dtype}, **hub)
    return pipeline, problems


#: The files a component's weights come in: what a local component folder without any of them lacks.
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def _component_problem(model_id: str, name: str, exc: BaseException) -> str:
    """What is wrong with one component of a pipeline, after its name: a local folder's that holds no weight file
    said so (the libraries name the pipeline's folder and the last file name they tried), else their first line."""
    folder = Path(model_id).expanduser() / name
    if folder.is_dir() and not any(path.suffix in WEIGHT_SUFFIXES for path in folder.iterdir()):
        return f"folder has no weights (no {' or '.join(WEIGHT_SUFFIXES)} file)"
    text = str(exc).strip().splitlines()
    return f"component: {text[0] if text else type(exc).__name__}"


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


def scheduler_class(name: str) -> type | None:
    """diffusers' scheduler class ``name`` (e.g. ``DDIMScheduler``), or None when diffusers has none of that name.

    A scheduler whose extra package is not installed (``DPMSolverSDEScheduler`` needs ``torchsde``) is one line
    saying which: diffusers puts a placeholder under its name that fails only when the scheduler is made.
    """
    from importlib.util import find_spec

    import diffusers

    cls = getattr(diffusers, name, None)
    needs = [package for package in getattr(cls, "_backends", ()) if find_spec(package) is None]
    if needs:
        raise AuditorError(f"the scheduler {name} needs {' and '.join(needs)}, which is not installed: pip install {' '.join(needs)}")
    is_scheduler = inspect.isclass(cls) and issubclass(cls, diffusers.SchedulerMixin) and cls is not diffusers.SchedulerMixin
    return cls if is_scheduler else None


def _scheduler(pipeline: Any, name: str) -> Any:
    """A scheduler of class ``name`` configured from the pipeline's own scheduler config."""
    cls = scheduler_class(name)
    if cls is None:
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


def unread_end(prompt: str, window: int, tokens: Callable[[str], int]) -> str:
    """The end of ``prompt`` a text encoder reading ``window`` tokens (special ones included) misses, as the
    user wrote it: from the first word not read whole (decoding the tokens instead would give CLIP's lower
    case and could start mid-word). ``tokens`` counts a text's tokens; a whole-word prefix of a prompt is a
    prefix of its tokens (tokenizers split words before their pieces), so the words that fit are found by
    bisection."""
    words = list(re.finditer(r"\S+", prompt))
    fits, over = 0, len(words)  # the first ``fits`` words are read whole; all ``over`` of them are not
    while over - fits > 1:
        middle = (fits + over) // 2
        if tokens(prompt[: words[middle - 1].end()]) <= window:
            fits = middle
        else:
            over = middle
    return prompt[words[fits].start() :] if fits < len(words) else ""
