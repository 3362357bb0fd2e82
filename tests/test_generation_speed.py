"""Generation speed-ups on the tiny pipeline: --batch-size auto finds a batch and remembers it,
--compile compiles where torch.compile works and falls back cleanly where it does not."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import BackendError
from auditor.core.store import RunStore
from auditor.executors.batch_size import STAGE as BATCH_SIZE_STAGE
from auditor.generation.base import GenerationItem
from auditor.generation.registry import T2I_BACKENDS
from auditor.records import GenerationSettings, load_record
from auditor.studies.progress import QuietProgress
from auditor.studies.prompt_audit import PromptAuditOptions, start_audit
from tests.clitools import run_auditor

ITEMS = [GenerationItem("a photo of a cat", 0, 0), GenerationItem("a photo of a dog", 1, 1), GenerationItem("a cow", 2, 2)]


def load(tiny_models, batch_size: int = 2):
    return T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(steps=2, batch_size=batch_size))


def pixels(pictures) -> list[np.ndarray]:
    return [np.asarray(picture.image, dtype=np.int16) for picture in pictures]


@contextmanager
def unet_batches(backend):
    """The batch size of every UNet forward (classifier-free guidance doubles the images)."""
    seen: list[int] = []
    hook = backend.pipeline.unet.register_forward_pre_hook(lambda _module, args: seen.append(args[0].shape[0]))
    try:
        yield seen
    finally:
        hook.remove()


def test_probe_starts_at_the_cap_with_one_real_pipeline_call(tiny_models):
    backend = load(tiny_models)
    with unet_batches(backend) as seen:
        assert backend.probe_batch_size() == 4  # on a CPU the cap is 4, and it fits
    assert set(seen) == {8}  # one call, of 4 images (guidance doubles each UNet batch)
    key = backend.batch_size_key()
    assert key["device"] == "cpu" and key["memory"] is None


@contextmanager
def memory_for(backend, images: int, error: type[Exception] | None = None):
    """The UNet runs out of memory (or raises ``error``) above ``images`` images (a smaller device than this one)."""
    import torch

    def refuse(_module, args):
        if args[0].shape[0] > 2 * images:
            raise (error or torch.OutOfMemoryError)(f"tried a batch of {args[0].shape[0] // 2} images")

    hook = backend.pipeline.unet.register_forward_pre_hook(refuse)
    try:
        yield
    finally:
        hook.remove()


def test_probe_halves_the_batch_until_one_fits(tiny_models):
    backend = load(tiny_models)
    with unet_batches(backend) as seen, memory_for(backend, 2):
        assert backend.probe_batch_size() == 2
    assert seen[0] == 8 and set(seen[1:]) == {4}  # 4 images ran out of memory at the first step; 2 ran
    with memory_for(backend, 0), pytest.raises(BackendError, match="not even one image fits in the memory of cpu"):
        backend.probe_batch_size()
    # a kernel that cannot take a large batch (e.g. past 32-bit indexing) is no reason to stop probing
    with memory_for(backend, 1, RuntimeError):
        assert backend.probe_batch_size() == 1
    with memory_for(backend, 0, RuntimeError), pytest.raises(RuntimeError, match="a batch of 1 images"):
        backend.probe_batch_size()  # but an error at one image is the model's own, and it is raised


def audit_options(tiny_models, images: int = 1, **generation) -> PromptAuditOptions:
    return PromptAuditOptions(
        prompt="a photo of a pharmacist",
        llm="offline",
        t2i=f"diffusers:{tiny_models.t2i}",
        vqa=f"blip2:{tiny_models.vqa}",
        embedder=None,
        images=images,
        generation=GenerationSettings(steps=2, **generation),
        max_axes=1,
        max_counterfactuals=2,
    )


def test_batch_size_auto_is_probed_once_per_model_and_device_and_recorded(tiny_models, tmp_path):
    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    first = start_audit(audit_options(tiny_models, batch_size_auto=True), store, cache, QuietProgress(), "a").run()
    assert first.status == "completed"
    assert (first.config.generation.batch_size, first.config.generation.batch_size_auto) == (4, True)
    assert cache.misses[BATCH_SIZE_STAGE] == 1 and cache.entries(BATCH_SIZE_STAGE) == 1
    cache.close()

    cache = ContentCache(tmp_path / "cache.sqlite")  # a later run with images to make reads the size: no probe
    second = start_audit(audit_options(tiny_models, 2, batch_size_auto=True), store, cache, QuietProgress(), "b").run()
    assert second.config.generation.batch_size == 4
    assert cache.hits[BATCH_SIZE_STAGE] == 1 and cache.misses[BATCH_SIZE_STAGE] == 0
    # The batch size is no part of the images' keys: the first run's images were reused.
    assert [s.images[:1] for s in second.prompt_sets] == [s.images for s in first.prompt_sets]
    cache.close()

    cache = ContentCache(tmp_path / "cache.sqlite")  # nothing to make: the size comes with the model's description
    third = start_audit(audit_options(tiny_models, 2, batch_size_auto=True), store, cache, QuietProgress(), "c").run()
    assert third.config.generation == second.config.generation
    assert cache.hits[BATCH_SIZE_STAGE] == 0 and cache.misses[BATCH_SIZE_STAGE] == 0
    cache.close()


def test_batch_size_auto_is_remembered_across_steps_and_schedulers_but_not_executors(tiny_models, tmp_path):
    """More or fewer steps, or another scheduler, repeat the same forward passes: the size found holds. Another
    executor puts other models beside generation on the GPU, so its size is probed on its own."""
    store = RunStore(tmp_path / "runs")

    def run(
        name: str, executor: str = "sequential", images: int = 1, embedder: str | None = None, **generation
    ) -> tuple[int, int, int]:
        cache = ContentCache(tmp_path / "cache.sqlite")
        try:
            settings = GenerationSettings(batch_size_auto=True, **generation)
            options = audit_options(tiny_models, images)
            options = replace(options, executor=executor, generation=settings, embedder=embedder)
            record = start_audit(options, store, cache, QuietProgress(), name).run()
            assert record.status == "completed" and record.config.generation.batch_size == 4
            return cache.hits[BATCH_SIZE_STAGE], cache.misses[BATCH_SIZE_STAGE], cache.entries(BATCH_SIZE_STAGE)
        finally:
            cache.close()

    assert run("a", steps=2) == (0, 1, 1)
    assert run("b", steps=3) == (1, 0, 1)
    assert run("c", steps=2, scheduler="DDIMScheduler") == (1, 0, 1)
    assert run("d", steps=2, width=48, height=40) == (0, 1, 2)  # another image size: other activations
    assert run("e", "overlapped", images=2, steps=2) == (0, 1, 3)  # a second image to make: the model loads
    assert run("f", "overlapped", images=2, steps=4) == (1, 0, 3)
    # another model loaded beside generation under overlapped (CLIP as well as BLIP-2): less room, probed again
    assert run("g", "overlapped", images=3, embedder=f"clip:{tiny_models.clip}", steps=2) == (0, 1, 4)
    assert run("h", "sequential", images=4, embedder=f"clip:{tiny_models.clip}", steps=2) == (1, 0, 4)  # one at a time


def test_batch_size_option_takes_a_number_or_auto(tiny_models, tmp_path):
    bad = run_auditor("prompt", "a photo of a cat", "--llm", "offline", "--batch-size", "lots", process=True)
    assert bad.returncode == 2 and "--batch-size takes a positive integer or 'auto'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()
    bad = run_auditor("prompt", "a photo of a cat", "--llm", "offline", "--executor", "fast")
    assert bad.returncode == 2 and "unknown executor 'fast'" in bad.stderr


def test_compile_matches_eager_images_and_is_recorded(tiny_models):
    eager = load(tiny_models)
    expected = pixels(eager.generate(ITEMS))
    compiled = load(tiny_models)
    assert compiled.compile() is None
    assert compiled.settings.optimizations[-1] == "torch.compile:default"
    with unet_batches(compiled) as seen:
        got = pixels(compiled.generate(ITEMS))
    assert len(got) == 3
    for a, b in zip(expected, got, strict=True):
        assert np.abs(a - b).max() <= 2  # floating-point noise at most
    assert set(seen) == {4}  # the last batch of one image was padded to the compiled shape (2 images, doubled)


def test_compile_falls_back_to_eager_where_inductor_cannot_build(tiny_models, monkeypatch, tmp_path):
    """A machine without a working C++ compiler: torch.compile fails at its first call."""
    import torch._dynamo
    import torch._inductor.config as inductor
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

    monkeypatch.setattr(inductor.cpp, "cxx", ("/nonexistent/c++",))
    backend = load(tiny_models)
    expected = [picture.image.tobytes() for picture in backend.generate(ITEMS)]
    torch._dynamo.reset()
    with temporary_cache_dir(str(tmp_path / "inductor")):  # no kernel built earlier in this process or machine
        reason = backend.compile()
    assert reason is not None and "C++ compiler" in reason
    assert not any(name.startswith("torch.compile") for name in backend.settings.optimizations)
    assert type(backend.pipeline.unet).__name__ == "UNet2DConditionModel" and "decode" not in vars(backend.pipeline.vae)
    assert [picture.image.tobytes() for picture in backend.generate(ITEMS)] == expected  # eager again, same images


def test_compile_falls_back_where_torch_compile_is_unavailable(tiny_models, tmp_path, monkeypatch):
    """torch.compile refusing at once (e.g. an unsupported Python): the audit runs eagerly and says so."""
    import torch

    def unsupported(*_args, **_kwargs):
        raise RuntimeError("Dynamo is not supported on this Python version")

    monkeypatch.setattr(torch, "compile", unsupported)
    notices: list[str] = []

    class Notices(QuietProgress):
        def notice(self, message: str) -> None:
            notices.append(message)

    store = RunStore(tmp_path / "runs")
    cache = ContentCache(tmp_path / "cache.sqlite")
    record = start_audit(audit_options(tiny_models, compile=True), store, cache, Notices(), "r").run()
    cache.close()
    assert record.status == "completed"
    assert record.config.generation.compile is True
    assert not any(name.startswith("torch.compile") for name in record.config.generation.optimizations)
    assert any("--compile: running without torch.compile (RuntimeError: Dynamo is not supported" in n for n in notices)
    assert load_record(store.root / "r" / "record.json").config.generation.compile is True


@pytest.mark.parametrize("field", ["batch_size", "batch_size_auto", "compile", "optimizations"])
def test_speed_settings_are_no_part_of_the_image_cache_key(tiny_models, field):
    backend = load(tiny_models)
    value = {"batch_size": 7, "batch_size_auto": True, "compile": True, "optimizations": ["fused_qkv"]}[field]
    before = backend.cache_fingerprint()
    backend.settings = backend.settings.model_copy(update={field: value})
    assert backend.cache_fingerprint() == before
