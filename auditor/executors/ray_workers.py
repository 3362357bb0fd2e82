"""What runs on the Ray workers: a stage's model, loaded once per worker, computing batches and chunks.

Workers only compute. They never touch the content cache or the record: every result
goes back to the driver, whose stage bookkeeping stores it through the run's one writer
thread (one SQLite writer, the same cache entries and record as the in-process
executors). A worker checks that its model is the one the driver recorded (the same
cache fingerprint: weights, dtype, device kind, settings), so an image cached under a
fingerprint was always made by that model; and a reader checks that each image file it
opens has the bytes the driver recorded, so a run folder that is not shared at the same
path on every node is an error, never a wrong answer.

This module is imported on the workers; like the rest of the stages it imports torch
and the model libraries only when a model loads.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.core.errors import AuditorError
from auditor.core.weights import LoadOptions
from auditor.executors.base import ModelRecipe
from auditor.executors.perception import DECODE_THREADS
from auditor.records import ModelRef

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

#: Methods of a stage's model the driver may call on a worker (each call loads the model there again:
#: they are rare: a batch-size probe, a few text embeddings, the words of a few prompts, a folder's check
#: that it has every image to be generated, the cut ends of prompts not known when it was described).
REMOTE_METHODS = ("probe_batch_size", "embed_texts", "prompt_words", "check", "cut_prompts")
SHARED_HINT = "mount the run folder at the same path on every node, or on none"


@dataclass(frozen=True)
class Placement:
    """Where a stage's workers run: what each holds (GPUs, CPUs), the device its model loads on, how many."""

    num_gpus: float
    num_cpus: float
    workers: int
    device: str | None = None
    allow_partial_weights: bool = False

    def load_options(self) -> LoadOptions:
        """How a worker loads the model: weight digests are computed there (the digest memo is the driver's cache)."""
        return LoadOptions(device=self.device, allow_partial_weights=self.allow_partial_weights)


@dataclass(frozen=True)
class ModelInfo:
    """What the driver records and keys the cache on, of a stage's model loaded on a worker."""

    ref: ModelRef
    settings: Any
    seeded: bool
    fingerprint: str
    #: The device and speed-ups a batch-size probe depends on (text-to-image models that probe), else None.
    batch_size_key: dict[str, Any] | None
    methods: frozenset[str]
    #: Whether the worker saw the file the driver asked about with the same bytes (a shared run folder).
    sees_file: bool
    #: ``(prompt, its end the text encoder never reads)`` of the prompts the driver asked about (``cut_prompts``).
    cut_prompts: tuple[tuple[str, str], ...] = ()


def worker_name() -> str:
    """``node address:process id`` of this worker."""
    import ray.util

    return f"{ray.util.get_node_ip_address()}:{os.getpid()}"


def describe(
    recipe: ModelRecipe, placement: Placement, probe: tuple[str, str] | None, prompts: Sequence[str] = ()
) -> ModelInfo:
    """Load the model as the stage's workers will, and say what identifies it (a Ray task).

    ``probe`` is a file of the run folder and its sha256: whether this worker sees it tells
    the driver whether the run folder is shared with the workers. ``prompts`` are those a
    generation stage may make images of: which of them the model's text encoder reads only in
    part is learnt here, with the model loaded anyway, not by loading it once more.
    """
    from auditor.core.devices import release_accelerator_memory

    model = recipe.load(placement.load_options())
    try:
        key = getattr(model, "batch_size_key", None)
        return ModelInfo(
            ref=model.ref,
            settings=getattr(model, "settings", None),
            seeded=bool(getattr(model, "seeded", True)),
            fingerprint=model.cache_fingerprint(),
            batch_size_key=key() if key is not None else None,
            methods=frozenset(name for name in REMOTE_METHODS if callable(getattr(model, name, None))),
            sees_file=probe is not None and _has_bytes(Path(probe[0]), probe[1]),
            cut_prompts=tuple(cut(list(prompts))) if prompts and (cut := getattr(model, "cut_prompts", None)) else (),
        )
    finally:
        model = None
        release_accelerator_memory()


def call(recipe: ModelRecipe, placement: Placement, method: str, args: tuple) -> Any:
    """Load the model and call one of its :data:`REMOTE_METHODS` (a Ray task)."""
    from auditor.core.devices import release_accelerator_memory

    if method not in REMOTE_METHODS:
        raise AuditorError(f"{method} is not run on Ray workers")
    model = recipe.load(placement.load_options())
    try:
        return getattr(model, method)(*args)
    finally:
        model = None
        release_accelerator_memory()


def _has_bytes(path: Path, sha256: str) -> bool:
    from auditor.core.store import sha256_bytes

    try:
        return sha256_bytes(path.read_bytes()) == sha256
    except OSError:
        return False


class _StageWorker:
    """A stage's model loaded once per worker (a Ray actor of the stage's pool), checked against the driver's.

    Each call takes one row (a generation batch, a reader chunk) and returns one row of two
    columns: ``result``, the pickled output of :meth:`work` (with the worker's name, process id,
    items and compute seconds, for the driver's throughput display), and ``error``, the
    pickled exception :meth:`work` raised. Ray Data would wrap such an exception in its own
    and keep only the traceback's text; the driver raises it as it was, and an error of the
    model code is not one a retry fixes, so it is not retried.
    """

    def __init__(self, recipe: ModelRecipe, placement: Placement, fingerprint: str):
        self.model = recipe.load(placement.load_options())
        self.name = worker_name()
        self.spec = recipe.spec
        self.same_model = self.model.cache_fingerprint() == fingerprint

    def work(self, row: dict[str, Any]) -> dict[str, Any]:
        """The output for one input row (its values unpacked from Ray Data's batch of one)."""
        raise NotImplementedError

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        started = time.perf_counter()
        try:
            if not self.same_model:
                raise AuditorError(
                    f"the worker {self.name} loads {self.spec} as another model than the run records "
                    "(other weights, dtype, device kind or settings): give every node the same model and GPUs"
                )
            output = self.work({name: values[0] for name, values in batch.items()})
        except Exception as exc:  # noqa: BLE001 - handed to the driver as it is
            return {"result": [b""], "error": [_pickled(exc)]}
        output.update(worker=self.name, pid=os.getpid(), seconds=time.perf_counter() - started)
        return {"result": [pickle.dumps(output)], "error": [b""]}


#: The attribute of a reader's failure that names the chunk it cut (its number among the stage's chunks).
FAILED_CHUNK = "auditor_failed_chunk"


def _pickled(exc: Exception) -> bytes:
    """The exception pickled, or a RuntimeError naming it where it does not survive pickling."""
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - any exception that does not make the trip
        return pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))


class GenerateWorker(_StageWorker):
    """Makes one generation batch per call and returns its images as PNG bytes (encoded here, not in the driver)."""

    def __init__(self, recipe: ModelRecipe, placement: Placement, fingerprint: str, batch_size: int, compile: bool):
        from auditor.executors.generation import compile_backend

        super().__init__(recipe, placement, fingerprint)
        self.model.settings = self.model.settings.model_copy(update={"batch_size": batch_size})
        self.notice = compile_backend(self.model) if compile else None

    def work(self, row: dict[str, Any]) -> dict[str, Any]:
        from auditor.executors.generation import encode
        from auditor.generation.base import GenerationItem

        items = [
            GenerationItem(prompt=str(prompt), index=int(index), seed=int(seed))
            for prompt, index, seed in zip(row["prompts"], row["indices"], row["seeds"], strict=True)
        ]
        return {
            "batch": int(row["batch"]),
            "pictures": [encode(picture) for picture in self.model.generate(items)],
            "items": len(items),
            "optimizations": list(self.model.settings.optimizations),
            "notice": self.notice,
        }


class ReadWorker(_StageWorker):
    """Computes one reader chunk per call (VQA answers, embeddings) with the reader's own ``compute``.

    A chunk's images come as files of the shared run folder or, without a shared
    filesystem, as PNG bytes through Ray's object store (one object per chunk, put by the
    driver); either way checked against the sha256 the driver recorded.
    """

    def __init__(self, recipe: ModelRecipe, placement: Placement, fingerprint: str, compute: Callable[..., Any]):
        super().__init__(recipe, placement, fingerprint)
        self.compute = compute

    def work(self, row: dict[str, Any]) -> dict[str, Any]:
        shas = [str(sha) for sha in row["sha256"]]
        if "png" in row:
            import ray

            sources: list[Path | bytes] = [bytes(data) for data in ray.get(row["png"][0])]
        else:
            sources = [Path(str(path)) for path in row["files"]]
        with ThreadPoolExecutor(max_workers=min(DECODE_THREADS, len(sources))) as pool:
            pictures = list(pool.map(self._picture, sources, shas))
        try:
            result = self.compute(self.model, pictures, pickle.loads(row["task"]))
        except Exception as exc:
            setattr(exc, FAILED_CHUNK, int(row["chunk"]))  # for the driver to salvage what the chunk got first
            raise
        return {"chunk": int(row["chunk"]), "result": result, "items": len(pictures)}

    def _picture(self, source: Path | bytes, sha256: str) -> Image.Image:
        """An image of the chunk, decoded once its bytes are known to be the ones the driver recorded."""
        from auditor.core.store import sha256_bytes
        from auditor.executors.generation import decode_png

        try:
            data = source if isinstance(source, bytes) else source.read_bytes()
        except OSError as exc:
            raise AuditorError(f"the worker {self.name} cannot read {source} ({exc.strerror}): {SHARED_HINT}") from None
        where = "an image" if isinstance(source, bytes) else str(source)
        if sha256_bytes(data) != sha256:
            raise AuditorError(f"the worker {self.name} reads other bytes in {where} than the run recorded: {SHARED_HINT}")
        return decode_png(data)


class BatchWorker(_StageWorker):
    """Computes one batch of a study's own stage per call with the stage's ``compute`` (traced generation)."""

    def __init__(self, recipe: ModelRecipe, placement: Placement, fingerprint: str, compute: Callable[..., Any]):
        super().__init__(recipe, placement, fingerprint)
        self.compute = compute

    def work(self, row: dict[str, Any]) -> dict[str, Any]:
        batch = pickle.loads(row["work"])
        return {"batch": int(row["batch"]), "result": self.compute(self.model, batch), "items": len(batch)}
