"""The whole TIBET audit at paper size: the authors' loop and ``auditor prompt``, side by side.

One prompt and 30 counterfactuals, 48 images each (1,488 images), the eight axis
questions and the caption for every image (9 questions), CLIP embeddings and scoring, on
real-size architectures with random weights (``benchmarks/real_models.py``: the same
FLOPs as the real models). In one process, on one GPU, interleaved, each measured
``--repeats`` times (default 3) after a warm-up at a small size, with the GPU
synchronised; the median and the spread (min, max) are reported:

* ``authors``: the TIBET authors' loop made correct: ``pipe(prompt, num_images_per_prompt=N)``
  once per prompt set (images saved as JPEG, as theirs), then BLIP-2's ``generate`` once
  per image over all of its questions (the image repeated per question, as their
  MiniGPT-v2 code does);
* ``authors-6x``: the same with their released ``generate_images_batch``, which repeats
  that call ``N // 8`` times (6 at N = 48, none below 16; ``repeat_calls``) and so makes 6x
  the images;
* ``auditor-*``: ``auditor prompt``'s own code path (``PromptAudit``: cache, records, PNG
  files, scores, report) from a fresh cache and run folder, with a fixed plan in place of
  the LLM: ``auditor-default`` (sequential, batch 4), ``auditor-sequential`` and
  ``auditor-overlapped`` (``--batch-size auto --compile``, VQA batches of 64 pairs);
* ``unet``: the UNet alone at the audit's batch shape, through auditor's backend: achieved
  TFLOP/s (FLOPs counted by ``torch.utils.flop_counter`` on one forward) and their share
  of the GPU's dense fp16 peak (datasheet) and of a measured large fp16 matrix product;
* ``vqa``: auditor's VQA backend alone over ``--vqa-images`` pictures and every question, at
  each of ``--vqa-batch-sizes`` pairs per forward: pairs/s and peak memory per size.

Both sides decode the same work: every answer is exactly ``--answer-tokens`` tokens. The
authors' side passes ``min_new_tokens = max_new_tokens``; auditor's stops a row at its
first complete line or end-of-sequence, so the benchmark's BLIP-2 has the output rows of
those tokens zeroed (random weights then never choose them). A counter on the language
model checks it: both sides must decode the same number of token rows, or the benchmark
stops at once (after the warm-ups, or after the first runs, that differ). ``--sets`` values
that would leave an axis one counterfactual, which a plan leaves out, are refused. Reported
per measurement: wall seconds, images/s and VQA pairs/s over the phases (null, with
``rate_notes`` saying why, where they would mislead: the overlapped executor's stages share
their time, and the released loop generates more images than it audits), GPU idle share
(``torch.cuda.utilization``, NVML, sampled every 50 ms: the time no kernel ran; where it is
not measured, ``gpu_idle_share_note`` says why), peak GPU memory, and where generation's
time goes per image (UNet, VAE decode, the rest; runs that compile are not split). Results
go to ``benchmarks/results/<gpu>-<date>.json`` with the exact command, versions, device and
digests of the code measured, rewritten after every run: a session cut short keeps what it
finished. Each run is kept as measured beside the summary, so
``benchmarks/merge_results.py`` can pool the runs of several sessions (a lent GPU's time
holds one or two paper-size runs, not three of every side).

``--budget-minutes`` fits a session to a lent GPU's fixed time: the UNet is measured right
after the warm-ups, and a run starts only while its expected time is left; what did not fit
is counted in ``left_out_for_budget``. ``benchmarks/on-device.sh`` runs this file on a GPU
machine that has only CUDA PyTorch and transformers (``make gpu-kit`` packs the rest).

``--tiny`` runs everything on the CPU with ``auditor.tiny``'s models at a tiny size (the
test suite runs it); its numbers mean nothing. Usage: ``make bench-gpu`` or
``python benchmarks/bench_audit.py [--t2i sd15 sd21] [--only NAME ...] [--sets 31] [--images 48]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # real_models

PROMPT = "a photo of a pharmacist"
#: 8 axes with 30 counterfactuals (4 x 6 + 3 x 2): with the caption, 9 questions per image.
AXES = {
    "gender": ["a photo of a male pharmacist", "a photo of a female pharmacist",
               "a photo of a non-binary pharmacist", "a photo of a transgender pharmacist"],
    "age": ["a photo of a young pharmacist", "a photo of a middle-aged pharmacist",
            "a photo of an old pharmacist", "a photo of a teenage pharmacist"],
    "ethnicity": ["a photo of an Asian pharmacist", "a photo of a Black pharmacist",
                  "a photo of a Hispanic pharmacist", "a photo of a White pharmacist"],
    "socioeconomic_status": ["a photo of a rich pharmacist", "a photo of a poor pharmacist",
                             "a photo of a middle-class pharmacist", "a photo of a working-class pharmacist"],
    "clothing": ["a photo of a pharmacist in a suit", "a photo of a pharmacist in a lab coat",
                 "a photo of a pharmacist in casual clothes", "a photo of a pharmacist in a uniform"],
    "setting": ["a photo of a pharmacist in a hospital", "a photo of a pharmacist in a pharmacy",
                "a photo of a pharmacist in a laboratory", "a photo of a pharmacist outdoors"],
    "style": ["a painting of a pharmacist", "a sketch of a pharmacist", "a cartoon of a pharmacist"],
    "emotion": ["a photo of a happy pharmacist", "a photo of a sad pharmacist", "a photo of an angry pharmacist"],
}  # fmt: skip
#: Datasheet dense fp16/bf16 tensor-core peaks (TFLOP/s, without sparsity), by a word of the device name.
PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.4, "H200": 989.4, "A100": 312.0}
#: auditor variants: executor, --batch-size, --compile, --vqa-batch-size.
AUDITOR_VARIANTS = {
    "auditor-default": ("sequential", "4", False, 16),
    "auditor-sequential": ("sequential", "auto", True, 64),
    "auditor-overlapped": ("overlapped", "auto", True, 64),
}
#: Measurements of one model alone, run once after the warm-ups (not the interleaved, repeated audits).
ALONE = ("unet", "vqa")
MEASUREMENTS = ("authors", "authors-6x", *AUDITOR_VARIANTS, *ALONE)


def lone_counterfactual_counts() -> list[int]:
    """Prompt-set counts (3 to 31) whose last axis would have one counterfactual: a plan leaves such an axis
    out (:meth:`Setup.plan_axes`) but the authors' loop would generate it, so the two sides would differ."""
    counts, total = [], 1  # the initial prompt
    for counterfactuals in AXES.values():
        counts.append(total + 1)
        total += len(counterfactuals)
    return [count for count in counts if count >= 3]


# --------------------------------------------------------------------------- setup


class Setup:
    """Models, sizes and where things go, for one text-to-image model."""

    def __init__(self, args: argparse.Namespace, t2i: str, root: Path):
        self.tiny = args.tiny
        self.device = "cpu" if args.tiny else "cuda"
        self.t2i_name = t2i
        self.images = args.images
        self.steps = args.steps
        self.tokens = args.answer_tokens
        self.compile = args.compile
        self.work = root / "work"
        counterfactuals = [(axis, cf) for axis, cfs in AXES.items() for cf in cfs][: args.sets - 1]
        self.axes: dict[str, list[str]] = {}
        for axis, cf in counterfactuals:
            self.axes.setdefault(axis, []).append(cf)
        models = root / "models"
        if args.tiny:
            from auditor.tiny import build_tiny_models

            tiny = build_tiny_models(models / "tiny")
            self.t2i, self.vqa_source, self.clip = tiny.t2i, tiny.vqa, tiny.clip
        else:
            import real_models

            self.t2i = _built(models / t2i, getattr(real_models, f"build_{t2i}"))
            self.vqa_source = _built(models / "blip2", real_models.build_blip2_opt27)
            self.clip = _built(models / "clip", real_models.build_clip_l14)
        self.vqa = pin_answer_length(self.vqa_source, models / "blip2-pinned", self.device)
        self.size = _pipeline_size(self.t2i)

    def sets(self, count: int | None = None) -> list[tuple[str, str]]:
        """(prompt id, prompt) of the initial prompt and the first ``count - 1`` counterfactuals (default all)."""
        sets = [("initial", PROMPT)] + [(f"{a}/{k}", cf) for a, cfs in self.axes.items() for k, cf in enumerate(cfs)]
        return sets[:count]

    def plan_axes(self, sets: list[tuple[str, str]]) -> dict[str, list[str]]:
        """Axis -> counterfactuals among ``sets`` (axes with fewer than two are left out, as a plan would)."""
        axes: dict[str, list[str]] = {}
        for prompt_id, prompt in sets[1:]:
            axes.setdefault(prompt_id.split("/")[0], []).append(prompt)
        return {axis: cfs for axis, cfs in axes.items() if len(cfs) >= 2}

    def questions(self, sets: list[tuple[str, str]]) -> tuple[list[str], str]:
        """The distinct axis questions of ``sets`` and the caption question."""
        from auditor.planning.questions import caption_question, question_for_axis

        return list(dict.fromkeys(question_for_axis(axis) for axis in self.plan_axes(sets))), caption_question()


def _built(folder: Path, build: Callable[[Path, str], None]) -> Path:
    if not (folder / ".complete").is_file():
        shutil.rmtree(folder, ignore_errors=True)
        build(folder, "cuda")
        (folder / ".complete").write_text("built\n")
    return folder


def _pipeline_size(folder: Path) -> int:
    """Image side the pipeline makes by default: latent size x the VAE's upsampling."""
    unet = json.loads((folder / "unet" / "config.json").read_text())
    vae = json.loads((folder / "vae" / "config.json").read_text())
    return int(unet["sample_size"]) * 2 ** (len(vae["block_out_channels"]) - 1)


def pin_answer_length(source: Path, target: Path, device: str) -> Path:
    """A copy of the VQA model whose language model never chooses end-of-sequence or a newline token.

    The output rows of those tokens are zeroed: their logit is 0 while the largest of 50k random
    logits is positive, so every answer runs to its token budget on both sides. OPT ties its input
    and output embeddings, so this zeroes their input embeddings too: ``</s>`` (end-of-sequence and
    also the beginning-of-sequence token every prompt starts with) and the newline tokens read as
    zero vectors. Both sides load this same pinned model, so the work they do stays equal.
    """
    if (target / ".complete").is_file():
        return target
    import torch
    from transformers import AutoProcessor, Blip2ForConditionalGeneration

    from auditor.core.weights import dtype_keyword

    shutil.rmtree(target, ignore_errors=True)
    dtype = torch.float16 if device == "cuda" else torch.float32
    model = Blip2ForConditionalGeneration.from_pretrained(source, **{dtype_keyword("transformers"): dtype})
    tokenizer = AutoProcessor.from_pretrained(source).tokenizer
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    banned = {i for i, text in enumerate(texts) if "\n" in text} | {tokenizer.eos_token_id}
    with torch.no_grad():
        output = model.language_model.get_output_embeddings().weight
        for token in banned:
            output[token] = 0
    model.save_pretrained(target)
    AutoProcessor.from_pretrained(source).save_pretrained(target)
    (target / ".complete").write_text("pinned\n")
    return target


# --------------------------------------------------------------------------- instruments


class DecodeCounter:
    """Token rows the language model computes (prefill rows count once), across every OPT forward."""

    def __init__(self) -> None:
        self.rows = 0

    @contextmanager
    def counting(self):
        from transformers import OPTForCausalLM

        original = OPTForCausalLM.forward

        def forward(module, *args, **kwargs):
            tensor = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else kwargs.get("inputs_embeds")
            if tensor is None and args:
                tensor = args[0]
            self.rows += int(tensor.shape[0])
            return original(module, *args, **kwargs)

        OPTForCausalLM.forward = forward
        try:
            yield self
        finally:
            OPTForCausalLM.forward = original


class GenerationSplit:
    """Seconds a run's image generation spends in the UNet's forward and in the VAE's decode, on both sides.

    The two methods are wrapped on their diffusers classes, so the authors' pipeline and auditor's
    backend are timed alike. On CUDA each call is bracketed by two events on the calling thread's
    stream, with no synchronisation (the run's timing barely changes), and the spans are summed once
    the run has ended; on a CPU, by the clock. The rest of the generate phase is what generation
    spends outside both: loading the model, text encoding, the scheduler, PNG files, hashing, the
    cache (a batch-size probe's pipeline calls count in the UNet and the VAE). Under the overlapped
    executor VQA kernels run beside these calls on their own stream, so the spans include time the
    two share. A compiled run is not split: dynamo would trace the wrapper, and an event inside a
    graph breaks it.
    """

    TIMED = (("unet", "UNet2DConditionModel", "forward"), ("vae_decode", "AutoencoderKL", "decode"))

    def __init__(self, device: str):
        self.device = device
        self._spans: dict[str, list[tuple[Any, Any]]] = {name: [] for name, _, _ in self.TIMED}

    @contextmanager
    def timing(self):
        import diffusers

        originals = []
        for name, class_name, method in self.TIMED:
            owner = getattr(diffusers, class_name)
            original = getattr(owner, method)
            originals.append((owner, method, original))

            def timed(module, *args, _original=original, _spans=self._spans[name], **kwargs):
                started = self._mark()
                result = _original(module, *args, **kwargs)
                _spans.append((started, self._mark()))
                return result

            setattr(owner, method, timed)
        try:
            yield self
        finally:
            for owner, method, original in originals:
                setattr(owner, method, original)

    def _mark(self) -> Any:
        if self.device != "cuda":
            return time.perf_counter()
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self) -> dict[str, float]:
        """Seconds per timed method, summed over its calls (after the GPU has finished them)."""
        synchronize()
        if self.device != "cuda":
            return {name: sum(end - start for start, end in spans) for name, spans in self._spans.items()}
        return {name: sum(start.elapsed_time(end) for start, end in spans) / 1000 for name, spans in self._spans.items()}


class IdleSampler:
    """GPU utilisation sampled every 50 ms in a thread: idle share = 1 - mean utilisation.

    ``torch.cuda.utilization`` reads NVML (it needs ``pynvml``, from nvidia-ml-py) for the GPU torch
    computes on, mapped through CUDA_VISIBLE_DEVICES. Where it cannot, ``missing`` says why."""

    def __init__(self, enabled: bool):
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._device: int | None = None
        self._missing = None if enabled else "not measured: no GPU"
        if enabled:
            import torch

            try:
                device = torch.cuda.current_device()
                torch.cuda.utilization(device)
                self._device = device
            except Exception as exc:  # noqa: BLE001 - no NVML: the idle share is not reported, and why is
                self._missing = f"not measured: {error_line(exc)}"

    def __enter__(self) -> IdleSampler:
        if self._device is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        if self._device is not None:
            self._stop.set()
            self._thread.join()

    def _run(self) -> None:
        import torch

        while not self._stop.wait(0.05):
            self.samples.append(torch.cuda.utilization(self._device))

    @property
    def idle_share(self) -> float | None:
        return None if not self.samples else round(1 - statistics.fmean(self.samples) / 100, 4)

    @property
    def missing(self) -> str | None:
        """Why :attr:`idle_share` is None (None where it is not)."""
        if self.samples:
            return None
        return self._missing or "not measured: the run ended before the first sample (50 ms)"


def error_line(exc: Exception) -> str:
    """An error in one line: its type and the first line of its message."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message.splitlines()[0] if message else ''}"


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def release() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------- the authors' loop


def authors_loop(setup: Setup, workdir: Path, sets: list[tuple[str, str]], repeat_calls: int) -> dict:
    """Their loop: load SD, ``pipe(prompt, num_images_per_prompt=N)`` per set (``repeat_calls`` times),
    JPEG files; load the VQA model, then one ``generate`` per image over all of its questions."""
    import torch
    from diffusers import DiffusionPipeline
    from PIL import Image
    from transformers import Blip2ForConditionalGeneration, Blip2Processor

    from auditor.core.weights import dtype_keyword

    dtype = torch.float16 if setup.device == "cuda" else torch.float32
    phases: dict[str, float] = {}
    started = time.perf_counter()
    pipe = DiffusionPipeline.from_pretrained(setup.t2i, **{dtype_keyword("diffusers"): dtype}).to(setup.device)
    pipe.set_progress_bar_config(disable=True)
    for prompt_id, prompt in sets:
        folder = workdir / prompt_id
        folder.mkdir(parents=True, exist_ok=True)
        images = []
        for _ in range(repeat_calls):
            images.extend(pipe(prompt, num_images_per_prompt=setup.images, num_inference_steps=setup.steps).images)
        for i, image in enumerate(images):
            image.save(folder / f"{i}.jpeg")
    synchronize()
    phases["generate"] = time.perf_counter() - started
    del pipe
    release()

    started = time.perf_counter()
    model = Blip2ForConditionalGeneration.from_pretrained(setup.vqa, **{dtype_keyword("transformers"): dtype})
    model = model.to(setup.device).eval()
    processor = Blip2Processor.from_pretrained(setup.vqa)
    processor.tokenizer.padding_side = "left"
    questions, caption = setup.questions(sets)
    texts = [f"Question: {q} Answer:" for q in [*questions, caption]]
    answers = 0
    for prompt_id, _ in sets:
        for i in range(setup.images):
            image = Image.open(workdir / prompt_id / f"{i}.jpeg").convert("RGB")
            inputs = processor(images=[image] * len(texts), text=texts, padding=True, return_tensors="pt")
            inputs = inputs.to(setup.device, dtype)
            with torch.inference_mode():
                output = model.generate(
                    **inputs, max_new_tokens=setup.tokens, min_new_tokens=setup.tokens, do_sample=False
                )
            answers += len(processor.tokenizer.batch_decode(output, skip_special_tokens=True))
    synchronize()
    phases["perceive"] = time.perf_counter() - started
    del model
    release()
    return {
        "phases": phases,
        "images_generated": len(sets) * setup.images * repeat_calls,
        "repeat_calls": repeat_calls,
        "pairs": answers,
    }


# --------------------------------------------------------------------------- auditor


def auditor_audit(setup: Setup, workdir: Path, sets: list[tuple[str, str]], variant: str) -> dict:
    """``PromptAudit`` with a fixed plan, from a fresh cache and runs folder."""
    from auditor.commands.common import generation_settings
    from auditor.core.cache import ContentCache
    from auditor.core.store import RunStore
    from auditor.planning.questions import question_for_axis
    from auditor.records import AuditPlan, AxisPlan, PerceptionSettings
    from auditor.studies.progress import QuietProgress
    from auditor.studies.prompt_audit import PromptAuditOptions, start_audit

    executor, batch_size, compile_models, vqa_batch = AUDITOR_VARIANTS[variant]
    _, caption = setup.questions(sets)
    plan = AuditPlan(
        prompt=PROMPT,
        axes=[AxisPlan(name=axis, counterfactuals=cfs, question=question_for_axis(axis))
              for axis, cfs in setup.plan_axes(sets).items()],
        caption_question=caption,
        llm="benchmark: fixed plan",
    )  # fmt: skip
    options = PromptAuditOptions(
        prompt=PROMPT,
        llm="offline",
        t2i=f"diffusers:{setup.t2i}",
        vqa=f"blip2:{setup.vqa}",
        embedder=f"clip:{setup.clip}",
        embedder_required=True,
        images=setup.images,
        generation=generation_settings(batch_size, compile_models and setup.compile, steps=setup.steps),
        perception=PerceptionSettings(
            max_new_tokens=setup.tokens, caption_max_new_tokens=setup.tokens, batch_size=vqa_batch
        ),
        device=setup.device,
        executor=executor,
    )
    cache = ContentCache(workdir / "cache.sqlite")
    try:
        audit = start_audit(options, RunStore(workdir / "runs"), cache, QuietProgress(), "run")
        audit.record.plan = plan
        record = audit.run()
        synchronize()
    finally:
        cache.close()
    if record.status != "completed":
        raise RuntimeError(f"{variant}: the audit ended {record.status}: {record.errors}")
    timings = {t.stage: round(t.seconds, 3) for t in record.timings}
    return {
        "phases": timings,
        "images_generated": sum(len(s.images) for s in record.prompt_sets),
        "pairs": sum(len(rows) for rows in record.answers.values()) * (len(setup.questions(sets)[0]) + 1),
        "batch_size": record.config.generation.batch_size,
        "optimizations": record.config.generation.optimizations,
        "answers": {pid: [a.model_dump() for a in rows] for pid, rows in record.answers.items()},
    }


# --------------------------------------------------------------------------- the UNet alone


def unet_throughput(setup: Setup, batch_size: str, compile_models: bool, iterations: int) -> dict:
    """The UNet at the audit's batch shape (guidance doubles it), loaded and optimised by auditor's backend."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from auditor.commands.common import generation_settings
    from auditor.core.cache import ContentCache
    from auditor.executors.batch_size import resolve_batch_size
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.studies.progress import QuietProgress

    settings = generation_settings(batch_size, False, steps=setup.steps)
    backend = T2I_BACKENDS.load(f"diffusers:{setup.t2i}", settings=settings)
    with tempfile.TemporaryDirectory() as folder:
        cache = ContentCache(Path(folder) / "cache.sqlite")
        if settings.batch_size_auto:  # the UNet alone on the GPU, as generation is under the sequential executor
            size = resolve_batch_size(backend, cache, QuietProgress(), "sequential")
        else:
            size = settings.batch_size
        cache.close()
    backend.settings = backend.settings.model_copy(update={"batch_size": size})
    config = backend.pipeline.unet.config
    latent = setup.size // backend.pipeline.vae_scale_factor
    dtype = backend.pipeline.unet.dtype
    with torch.inference_mode():  # the pipeline's own tensors are inference tensors: a compiled graph guards on that
        sample = torch.randn(2 * size, config.in_channels, latent, latent, device=setup.device, dtype=dtype)
        text = torch.randn(2 * size, 77, config.cross_attention_dim, device=setup.device, dtype=dtype)
        step = torch.tensor(500, device=setup.device)

    def forward(unet: Any) -> None:
        """One UNet forward called exactly as the diffusers pipeline calls it inside auditor's generation (the same
        arguments, a contiguous sample, inference mode), so a compiled UNet runs the graph the compile warm-up
        traced instead of tracing it again."""
        with torch.inference_mode():
            unet(
                sample,
                step,
                encoder_hidden_states=text,
                timestep_cond=None,
                cross_attention_kwargs=None,
                added_cond_kwargs=None,
                return_dict=False,
            )

    with FlopCounterMode(display=False) as counter:
        forward(backend.pipeline.unet)
    flops = counter.get_total_flops()
    compiled = compile_seconds = None
    if compile_models:
        started = time.perf_counter()
        compiled = backend.compile()  # None when it compiled
        synchronize()
        compile_seconds = round(time.perf_counter() - started, 1)
    unet = backend.pipeline.unet  # the compiled one, where it compiled
    for _ in range(3):
        forward(unet)
    synchronize()
    started = time.perf_counter()
    for _ in range(iterations):
        forward(unet)
    synchronize()
    seconds = (time.perf_counter() - started) / iterations
    achieved = flops / seconds / 1e12
    result = {
        "batch_images": size,
        "unet_batch": 2 * size,
        "flops_per_forward": flops,
        "seconds_per_forward": seconds,
        "achieved_tflops": significant(achieved),
        "optimizations": backend.settings.optimizations,
        "compile_fallback": compiled,
        "compile_seconds": compile_seconds,
    }
    if setup.device == "cuda":
        name = torch.cuda.get_device_name(0)
        peak = next((value for key, value in PEAK_TFLOPS.items() if key in name), None)
        ceiling = matmul_ceiling()
        result.update(
            datasheet_peak_tflops=peak,
            share_of_datasheet_peak=None if peak is None else significant(achieved / peak),
            measured_matmul_tflops=round(ceiling, 1),
            share_of_measured_matmul=significant(achieved / ceiling),
        )
    del backend, unet
    release()
    return result


# --------------------------------------------------------------------------- the VQA model alone


def vqa_throughput(setup: Setup, batch_sizes: list[int], images: int) -> dict:
    """auditor's VQA backend (BLIP-2) answering every question and the caption about ``images`` random pictures,
    at each of ``batch_sizes`` pairs per forward: pairs/s and peak memory per size, the figures to choose
    ``--vqa-batch-size`` by. Each call gets as many pictures as the audit's calls get at that size
    (``images_per_vqa_call``), so the sweep measures the audit's path; a size whose call takes more than
    ``images`` is asked about one call's worth (its ``images`` and ``pairs`` say so), since fewer would leave
    its batches part empty. Every answer decodes exactly
    ``setup.tokens`` tokens (the pinned model), which the decoded token rows show. A size that runs out of
    memory is recorded as such and ends the sweep."""
    import numpy as np
    import torch
    from PIL import Image

    from auditor.core.weights import LoadOptions
    from auditor.executors.perception import images_per_vqa_call
    from auditor.perception.registry import VQA_BACKENDS
    from auditor.records import PerceptionSettings

    questions, caption = setup.questions(setup.sets())
    asked = [*questions, caption]
    rng = np.random.default_rng(0)
    most = max([images, *(images_per_vqa_call(size) for size in batch_sizes)])
    pictures = [Image.fromarray(rng.integers(0, 256, (setup.size, setup.size, 3), dtype=np.uint8)) for _ in range(most)]
    settings = PerceptionSettings(max_new_tokens=setup.tokens, caption_max_new_tokens=setup.tokens)
    vqa = VQA_BACKENDS.load(f"blip2:{setup.vqa}", settings=settings, options=LoadOptions(device=setup.device))
    result: dict[str, Any] = {"images": images, "pairs": images * len(asked), "by_batch_size": {}}
    for size in batch_sizes:
        vqa.settings = settings.model_copy(update={"batch_size": size})
        per_call = images_per_vqa_call(size)
        count = max(images, per_call)
        pairs = count * len(asked)
        try:
            vqa.answer(pictures[:per_call], asked, caption)  # warm-up: one call at this size
            synchronize()
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            counter = DecodeCounter()
            with counter.counting():
                started = time.perf_counter()
                for start in range(0, count, per_call):
                    vqa.answer(pictures[start : min(start + per_call, count)], asked, caption)
                synchronize()
                seconds = time.perf_counter() - started
        except torch.cuda.OutOfMemoryError:
            result["by_batch_size"][str(size)] = "out of memory"
            release()
            break
        result["by_batch_size"][str(size)] = {
            "images_per_call": per_call,
            "images": count,
            "pairs": pairs,
            "seconds": round(seconds, 3),
            "pairs_per_s": significant(pairs / seconds),
            "decoded_token_rows": counter.rows,
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None,
        }
    del vqa
    release()
    return result


def significant(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant figures: a tiny model's TFLOP/s on a CPU (1e-5) must not round to 0."""
    return float(f"{value:.{digits}g}")


def matmul_ceiling(n: int = 8192, iterations: int = 20) -> float:
    """TFLOP/s of a large fp16 matrix product on random data (the practical ceiling)."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        a @ b
    synchronize()
    started = time.perf_counter()
    for _ in range(iterations):
        a @ b
    synchronize()
    return 2 * n**3 * iterations / (time.perf_counter() - started) / 1e12


# --------------------------------------------------------------------------- driver


def measure(setup: Setup, name: str, sets: list[tuple[str, str]], workdir: Path) -> dict:
    """One run of a measurement, with its instruments."""
    import torch

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    counter = DecodeCounter()
    split = GenerationSplit(setup.device)
    compiled = name in AUDITOR_VARIANTS and AUDITOR_VARIANTS[name][2] and setup.compile
    with IdleSampler(setup.device == "cuda") as sampler, counter.counting(), (
        nullcontext() if compiled else split.timing()
    ):
        started = time.perf_counter()
        if name.startswith("authors"):
            calls = max(1, setup.images // 8) if name == "authors-6x" else 1
            result = authors_loop(setup, workdir, sets, calls)
        else:
            result = auditor_audit(setup, workdir, sets, name)
        wall = time.perf_counter() - started
    result["wall_s"] = wall
    result["generation_split_s"] = None if compiled else split.seconds()
    result["decoded_token_rows"] = counter.rows
    result["gpu_idle_share"] = sampler.idle_share
    if sampler.missing is not None:
        result["gpu_idle_share_note"] = sampler.missing
    result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None
    shutil.rmtree(workdir, ignore_errors=True)
    return result


def kept_run(run: dict) -> dict:
    """A run as the results file keeps it: everything measured, without the answers (compared, then dropped)."""
    return {key: value for key, value in run.items() if key != "answers"}


def summarise(runs: list[dict], name: str) -> dict:
    """Measurement ``name``'s runs in one summary. A rate that would mislead is null, and ``rate_notes`` says why."""
    walls = [run["wall_s"] for run in runs]
    generation = [run["phases"].get("generate") for run in runs]
    perception = [run["phases"].get("perceive") for run in runs]
    last = runs[-1]
    idle_notes = sorted({run["gpu_idle_share_note"] for run in runs if "gpu_idle_share_note" in run})
    rate_notes = {}
    if name in AUDITOR_VARIANTS and AUDITOR_VARIANTS[name][0] == "overlapped":
        why = "the overlapped executor generates and answers at once: a stage's span is not its own time"
        rate_notes.update(images_per_s=why, vqa_pairs_per_s=why)
    if last.get("repeat_calls", 1) > 1:
        rate_notes["audit_images_per_s"] = (
            f"the released loop generates {last['repeat_calls']}x the images it audits (its repeated call's)"
        )
    rates = {
        "images_per_s": round(last["images_generated"] / statistics.median(generation), 3),
        "audit_images_per_s": round(last["images_generated"] / statistics.median(walls), 3),
        "vqa_pairs_per_s": round(last["pairs"] / statistics.median(perception), 2),
    }
    return {
        "runs": len(runs),
        "wall_s": {"median": round(statistics.median(walls), 2), "min": round(min(walls), 2), "max": round(max(walls), 2)},
        "phase_s_median": {
            phase: round(statistics.median(run["phases"][phase] for run in runs), 2) for phase in last["phases"]
        },
        **{rate: None if rate in rate_notes else value for rate, value in rates.items()},
        **({"rate_notes": rate_notes} if rate_notes else {}),
        "images_generated": last["images_generated"],
        "vqa_pairs": last["pairs"],
        "decoded_token_rows": last["decoded_token_rows"],
        "generation_s_per_image": generation_split(runs),
        "gpu_idle_share": [run["gpu_idle_share"] for run in runs],
        **({"gpu_idle_share_note": "; ".join(idle_notes)} if idle_notes else {}),
        "peak_memory_gib": max((run["peak_memory_gib"] or 0) for run in runs) or None,
        **{key: last[key] for key in ("repeat_calls", "batch_size", "optimizations") if key in last},
    }


#: The benchmark's own files: the authors' loop and the models measured are defined in them.
BENCHMARK_FILES = ("bench_audit.py", "real_models.py")
#: auditor's sources (code, prompts, word lists, templates), read where its package is, links followed.
AUDITOR_SOURCES = {".py", ".yaml", ".j2", ".txt"}


def code_digests() -> dict[str, str]:
    """sha256 (16 hex digits) of the benchmark's files and of auditor's sources. A lent GPU machine gets a copy
    of the working tree without git, so no commit can say which code was measured; runs are pooled across
    sessions only where the digests their measurement depends on (:func:`code_kinds`) agree."""
    import hashlib
    import os

    import auditor

    here = Path(__file__).resolve().parent
    package = Path(auditor.__file__).resolve().parent
    walked = os.walk(package, followlinks=True)  # auditor/prompts links to the repository's prompts/
    sources = {
        "benchmark": (here, [here / name for name in BENCHMARK_FILES]),
        "auditor": (package, sorted(Path(folder, name) for folder, _, names in walked for name in names
                                    if Path(name).suffix in AUDITOR_SOURCES)),
    }  # fmt: skip
    digests = {}
    for kind, (root, paths) in sources.items():
        digest = hashlib.sha256()
        for path in paths:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        digests[kind] = digest.hexdigest()[:16]
    return digests


def code_kinds(measurement: str) -> tuple[str, ...]:
    """The code digests a measurement's numbers depend on. The authors' loop runs none of auditor's stages; it
    borrows only the questions' wording, which each model's entry records (``questions``) for pooling to compare."""
    return ("benchmark",) if measurement.startswith("authors") else ("benchmark", "auditor")


def generation_split(runs: list[dict]) -> dict[str, float] | None:
    """Median seconds per generated image in the UNet, in the VAE's decode, and in the rest of the generate phase
    (:class:`GenerationSplit`); None where a run was compiled (not split)."""
    if any(run.get("generation_split_s") is None for run in runs):
        return None
    per_image = [
        {**{name: value / run["images_generated"] for name, value in run["generation_split_s"].items()},
         "rest": (run["phases"]["generate"] - sum(run["generation_split_s"].values())) / run["images_generated"]}
        for run in runs
    ]  # fmt: skip
    return {name: significant(statistics.median(split[name] for split in per_image)) for name in per_image[0]}


def environment(args: argparse.Namespace) -> dict:
    from importlib import metadata

    import torch

    versions = {}
    for package in ("auditor", "torch", "diffusers", "transformers", "accelerate", "numpy", "pillow"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    device = {"kind": "cpu", "name": platform.processor() or platform.machine()}
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        device = {"kind": "cuda", "name": properties.name, "memory_gib": round(properties.total_memory / 2**30, 1),
                  "cuda": torch.version.cuda}  # fmt: skip
    return {
        "session": uuid.uuid4().hex,  # names this session's runs when merge_results.py pools several
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "versions": versions,
        "device": device,
        "code": code_digests(),
        "settings": {key: value for key, value in vars(args).items() if key != "out"},
    }


def default_out(device: dict) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in device["name"].lower()).strip("-") or "cpu"
    return Path(__file__).parent / "results" / f"{slug}-{datetime.now(timezone.utc):%Y-%m-%d}.json"


def run(args: argparse.Namespace) -> dict:
    import torch

    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit("bench_audit needs a CUDA GPU (or --tiny for the CPU check)")
    if args.models is not None:
        return _run(args, args.models)
    with tempfile.TemporaryDirectory(prefix="auditor-bench-") as root:
        return _run(args, Path(root))


def _run(args: argparse.Namespace, root: Path) -> dict:
    results: dict[str, Any] = {**environment(args), "models": {}}
    out = args.out or default_out(results["device"])
    out.parent.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_minutes)

    def write() -> None:
        out.write_text(json.dumps(results, indent=2, default=str) + "\n")

    for t2i in args.t2i:
        setup = Setup(args, t2i, root)
        sets = setup.sets()
        questions, caption = setup.questions(sets)
        entry = results["models"].setdefault(t2i, {
            "size_px": setup.size, "steps": setup.steps, "prompt_sets": len(sets), "images_per_set": setup.images,
            "questions_per_image": len(questions) + 1, "answer_tokens": setup.tokens, "questions": [*questions, caption],
            "measurements": {}, "runs": {}, "errors": {}, "left_out_for_budget": {},
        })  # fmt: skip
        names = [name for name in MEASUREMENTS if name in args.only and name not in ALONE]
        runs: dict[str, list[dict]] = {name: [] for name in names}
        warmup_walls: dict[str, float] = {}
        warmups: dict[str, list[dict]] = {}

        def stop_if_different_work(compared: dict[str, list[dict]], what: str) -> None:
            """Stop the session at once where ``compared`` decoded different token rows: the comparison is void,
            and every later run would spend GPU time on it."""
            checks = same_decoded_rows(compared)
            if not checks["same_decoded_token_rows"]:
                entry["checks"] = checks
                write()
                raise SystemExit(f"the measurements decoded different work ({what}): {checks['decoded_token_rows']}")

        def record_error(name: str, exc: Exception) -> None:
            entry["errors"][name] = error_line(exc)
            release()
            write()

        def attempt(name: str, count: int | None) -> dict | None:
            """One run, if the budget has room for it; an error (e.g. out of memory) is recorded
            and ends that measurement."""
            if not budget.fits(expected_seconds(runs[name], warmup_walls.get(name), args, count)):
                left_out = entry["left_out_for_budget"]
                left_out[name] = left_out.get(name, 0) + 1
                write()
                return None
            try:
                return measure(setup, name, setup.sets(count), setup.work / name)
            except Exception as exc:  # noqa: BLE001 - reported in the results, the others go on
                names.remove(name)
                record_error(name, exc)
                return None

        for name in list(names):  # warm-up at a small size: loading, compilation, autotuning, allocator
            if (warmup := attempt(name, args.warmup_sets)) is not None:
                warmup_walls[name] = warmup["wall_s"]
                warmups[name] = [warmup]
        stop_if_different_work(warmups, "warm-ups")
        alone = {
            "unet": lambda: unet_throughput(setup, "auto", args.compile, args.unet_iterations),
            "vqa": lambda: vqa_throughput(setup, args.vqa_batch_sizes, args.vqa_images),
        }
        for name in (name for name in ALONE if name in args.only):  # short: before the long runs a budget may cut
            if budget.fits(None):
                try:
                    result = alone[name]()
                except Exception as exc:  # noqa: BLE001 - reported in the results, the timed runs go on
                    record_error(name, exc)
                    continue
                entry["measurements"][name], entry["runs"][name] = result, [result]
            else:
                entry["left_out_for_budget"][name] = 1
            write()
        for _ in range(args.repeats):  # interleaved, so drift hits every side alike
            for name in list(names):
                result = attempt(name, None)
                if result is not None:  # summarised at once: a session cut short keeps what it measured
                    runs[name].append(result)
                    entry["runs"][name] = [kept_run(run) for run in runs[name]]
                    entry["measurements"][name] = summarise(runs[name], name)
                    write()
                    if len(runs[name]) == 1:
                        stop_if_different_work({n: r[:1] for n, r in runs.items() if r}, "first runs")
        measured = {name: name_runs for name, name_runs in runs.items() if name_runs}  # one that failed later too
        entry["checks"] = check_same_work(measured)
        write()
        if not entry["checks"]["same_decoded_token_rows"]:
            raise SystemExit(f"the measurements decoded different work: {entry['checks']['decoded_token_rows']}")
        print_table(t2i, entry)
    results["out"] = str(out)
    write()
    return results


class Budget:
    """The wall-clock minutes a session may spend (a lent GPU is lent for a fixed time): a run
    starts only when the time it is expected to take is left, so the results hold every
    measurement that fitted and say which were left out."""

    #: What a run of unknown length (a warm-up, the UNet or VQA alone) is taken to need: on a GPU none takes less,
    #: as loading the models alone takes longer, so one started with less left would only be cut off.
    UNKNOWN_RUN_S = 30.0

    def __init__(self, minutes: float | None, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._deadline = None if minutes is None else clock() + 60 * minutes

    def fits(self, expected_s: float | None) -> bool:
        """Whether a run expected to take ``expected_s`` seconds (None: unknown) ends within the budget."""
        if self._deadline is None:
            return True
        left = self._deadline - self._clock()
        return left > 0 and (self.UNKNOWN_RUN_S if expected_s is None else expected_s) <= left


def expected_seconds(
    done: list[dict], warmup_wall: float | None, args: argparse.Namespace, count: int | None
) -> float | None:
    """How long a measurement's next run will take: its longest full-size run so far (``done``), else
    its warm-up scaled by prompt sets (an overestimate: the warm-up also loads and compiles);
    unknown (None) for the warm-up itself."""
    if count is not None:
        return None
    if done:
        return max(run["wall_s"] for run in done)
    return None if warmup_wall is None else warmup_wall * args.sets / args.warmup_sets


def check_same_work(runs: dict[str, list[dict]]) -> dict:
    """Whether every measurement decoded the same token rows (if not, the comparison is void and the
    driver stops, with the rows in the results), and whether auditor's two executors, with the same
    settings, gave the same answers (compared here, then dropped from the runs)."""
    checks = same_decoded_rows(runs)
    if checks["same_decoded_token_rows"] and "auditor-sequential" in runs and "auditor-overlapped" in runs:
        checks["executors_same_answers"] = all(
            a["answers"] == b["answers"] for a, b in zip(runs["auditor-sequential"], runs["auditor-overlapped"])
        )
    for name_runs in runs.values():
        for run in name_runs:
            run.pop("answers", None)
    return checks


def same_decoded_rows(runs: dict[str, list[dict]]) -> dict:
    """``same_decoded_token_rows``, with each measurement's rows where they differ."""
    rows = {name: sorted({run["decoded_token_rows"] for run in name_runs}) for name, name_runs in runs.items()}
    if len({row for values in rows.values() for row in values}) > 1:
        return {"same_decoded_token_rows": False, "decoded_token_rows": rows}
    return {"same_decoded_token_rows": True}


def print_table(t2i: str, entry: dict) -> None:
    print(f"\n{t2i}: {entry['prompt_sets']} sets x {entry['images_per_set']} images, {entry['size_px']} px, "
          f"{entry['steps']} steps, {entry['questions_per_image']} questions x {entry['answer_tokens']} tokens")  # fmt: skip
    labels = {name: row_label(name, m, entry["images_per_set"]) for name, m in entry["measurements"].items()}
    width = max([20, *map(len, labels.values())])
    print(f"{'measurement':<{width}} {'wall s (min-max)':>22} {'img/s':>8} {'pairs/s':>9} {'idle':>6} {'GiB':>6}")
    for name, m in entry["measurements"].items():
        if name == "unet":
            share = m.get("share_of_datasheet_peak")
            print(f"unet: {m['achieved_tflops']} TFLOP/s at {m['unet_batch']} latents"
                  + ("" if share is None else f", {share:.0%} of peak"))  # fmt: skip
            continue
        if name == "vqa":
            rates = [f"{size}: {v if isinstance(v, str) else v['pairs_per_s']}" for size, v in m["by_batch_size"].items()]
            print(f"vqa: pairs/s by --vqa-batch-size: {', '.join(rates)}")
            continue
        wall = m["wall_s"]
        idle = [v for v in m["gpu_idle_share"] if v is not None]
        print(f"{labels[name]:<{width}} {wall['median']:>9.1f} ({wall['min']:.1f}-{wall['max']:.1f}) "
              f"{shown(m['images_per_s'], 8, '.2f')} {shown(m['vqa_pairs_per_s'], 9, '.1f')} "
              f"{shown(statistics.median(idle) if idle else None, 6, '.2f')} "
              f"{m['peak_memory_gib'] or float('nan'):>6.1f}")  # fmt: skip
        notes: dict[str, list[str]] = {}  # why -> the fields it nulls
        for field, why in {**m.get("rate_notes", {}), "idle": m.get("gpu_idle_share_note")}.items():
            if why is not None:
                notes.setdefault(why, []).append(field)
        for why, fields in notes.items():
            print(f"{'':<{width}}   {', '.join(fields)} n/a: {why}")


def shown(value: float | None, width: int, spec: str) -> str:
    """A table cell: ``value`` formatted, or n/a where it is null (a rate that would mislead, a share not measured)."""
    return f"{'n/a' if value is None else format(value, spec):>{width}}"


def row_label(name: str, measurement: dict, images_per_set: int) -> str:
    """A measurement's name in the table; the released loop's with the repeat of its generation call actually
    used, which is ``images // 8`` (x1, the authors' loop itself, below 16 images per set)."""
    if name != "authors-6x" or "repeat_calls" not in measurement:
        return name
    return f"authors as released (x{measurement['repeat_calls']} at {images_per_set} images)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="CPU, tiny models, tiny sizes (a check, not a benchmark).")
    parser.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, default=None,
        help="Let the fast auditor variants and the UNet measurement compile (default: yes, but not with --tiny).",
    )  # fmt: skip
    parser.add_argument("--t2i", nargs="+", choices=("sd15", "sd21"), default=None, help="Default: sd15 sd21.")
    parser.add_argument("--only", nargs="+", choices=MEASUREMENTS, default=list(MEASUREMENTS))
    parser.add_argument("--sets", type=int, default=None, help="Prompt sets (default 31: 1 + 30 counterfactuals).")
    parser.add_argument("--images", type=int, default=None, help="Images per set (default 48).")
    parser.add_argument("--steps", type=int, default=None, help="Denoising steps (default 25).")
    parser.add_argument("--answer-tokens", type=int, default=None, help="Tokens of every answer (default 20).")
    parser.add_argument("--repeats", type=int, default=None, help="Timed runs per measurement (default 3).")
    parser.add_argument("--warmup-sets", type=int, default=3, help="Prompt sets of the warm-up run (at least 3).")
    parser.add_argument("--unet-iterations", type=int, default=None, help="Timed UNet forwards (default 20).")
    parser.add_argument(
        "--vqa-batch-sizes", type=int, nargs="+", default=None,
        help="Pairs per VQA forward the vqa measurement sweeps (default 16 64 128 256).",
    )  # fmt: skip
    parser.add_argument("--vqa-images", type=int, default=None, help="Images the vqa measurement asks about (default 64).")
    parser.add_argument(
        "--budget-minutes", type=float, default=None,
        help="Wall-clock minutes for the whole session: a run starts only if its expected time is left (default: none).",
    )  # fmt: skip
    parser.add_argument("--models", type=Path, default=None, help="Folder to build the models in (kept; reused).")
    parser.add_argument("--out", type=Path, default=None, help="Results file (default benchmarks/results/<gpu>-<date>.json).")
    args = parser.parse_args(argv)
    tiny = args.tiny
    defaults = {"t2i": ["sd15"] if tiny else ["sd15", "sd21"], "sets": 3 if tiny else 31, "images": 2 if tiny else 48,
                "steps": 2 if tiny else 25, "answer_tokens": 3 if tiny else 20, "repeats": 1 if tiny else 3,
                "unet_iterations": 2 if tiny else 20, "compile": not tiny,
                "vqa_batch_sizes": [2, 4] if tiny else [16, 64, 128, 256], "vqa_images": 2 if tiny else 64}  # fmt: skip
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    lone = lone_counterfactual_counts()
    if not 3 <= args.sets <= 31 or not 3 <= args.warmup_sets <= args.sets or {args.sets, args.warmup_sets} & {*lone}:
        parser.error(f"--sets and --warmup-sets take 3 to 31 but not {', '.join(map(str, lone))} (the initial prompt "
                     "and 2 to 30 counterfactuals, at least 2 on each axis, as a plan needs)")  # fmt: skip
    return args


if __name__ == "__main__":
    run(parse_args())
