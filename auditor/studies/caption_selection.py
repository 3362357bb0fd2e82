"""The training side's selection stage: one streamed pass over the caption files, through the cache.

Both ``auditor amplification run`` and ``auditor amplification captions`` select an
occupation's training captions here (the methods are :mod:`auditor.corpora.selection`'s).
Two caches make a rerun or a resume free:

- **the whole selection**, keyed by the caption files' *contents* (sha256 of each file's
  bytes, in order, with its format and columns), the occupations, methods, prompts,
  sample size and seed, how captions are labelled, and the sentence embedder's
  fingerprint. A file's digest is memoised in the content cache by (resolved path, size,
  modification time, inode), exactly as model weights are (:meth:`ContentCache.file_digest`),
  so a multi-gigabyte sample is hashed once, and a copy or a move of the same bytes is the
  same sample while an edited file is not;
- **every caption's sentence embedding** (the nn methods), keyed by the embedder's
  fingerprint and the caption's text, so an interrupted pass resumes without embedding
  again, and the same caption in another file, run or selection is embedded once.

Selected examples refer to their file by its position in the file list, so a cached
selection stays right when the same files are read from another place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.fingerprint import file_sha256, text_fingerprint
from auditor.core.weights import LoadOptions
from auditor.corpora.gender import CaptionLabeller, FirstNames, GenderWords
from auditor.corpora.readers import BATCH_ROWS, CaptionBatch, CaptionReader
from auditor.corpora.selection import NN_METHODS, Method, SelectedCaption, Selection, select_captions
from auditor.records import CaptionFile, ModelRef
from auditor.records.sources import caption_files_read
from auditor.studies.progress import ProgressReporter, StageCounts

#: Cache stage of whole selections.
SELECT = "select"
#: Cache stage (and record stage) of caption sentence embeddings.
EMBED_CAPTIONS = "embed_captions"


@dataclass
class SelectionRequest:
    """What to select: the sample, its columns, the occupations and methods, and the selection settings."""

    captions: str
    occupations: list[str]
    methods: list[Method]
    #: Occupation -> the prompts the nn methods rank by (one selection per prompt).
    prompts: dict[str, list[str]]
    caption_column: str | None = None
    image_column: str | None = None
    per_occupation: int = 500
    sample_seed: int = 0
    names: bool = False
    #: Rows per streamed batch; the selection does not depend on it.
    batch_rows: int = BATCH_ROWS

    @property
    def wants_embedder(self) -> bool:
        return any(method in NN_METHODS for method in self.methods)

    def reader(self) -> CaptionReader:
        """Open the sample: files found and their columns resolved (one-line errors before any work)."""
        return CaptionReader(self.captions, self.caption_column, self.image_column, self.batch_rows)

    def labeller(self) -> CaptionLabeller:
        return CaptionLabeller(GenderWords.builtin(), FirstNames() if self.names else None)


@dataclass
class SelectionResult:
    """The selections and what the pass found out about the sample."""

    selections: list[Selection]
    files: list[CaptionFile]
    rows: int
    skipped: int
    labels: str
    text_embedder: ModelRef | None
    #: Whole selections computed or taken from the cache (all of them one way or the other).
    selected: StageCounts = field(default_factory=StageCounts)
    #: Caption (and prompt) sentence embeddings computed or taken from the cache, and the seconds spent on them.
    embedded: StageCounts = field(default_factory=StageCounts)
    embed_seconds: float = 0.0


def select_training_captions(
    request: SelectionRequest,
    cache: ContentCache,
    progress: ProgressReporter,
    *,
    text_embedder: str = "minilm",
    load_options: LoadOptions | None = None,
    digest: Callable[[Path], str] = file_sha256,
) -> SelectionResult:
    """Every selection of ``request``, from the cache when this sample was selected the same way before.

    ``digest`` hashes a caption file (a study passes one with a progress bar); its result is
    memoised in the cache. ``text_embedder`` is loaded only for the nn methods.
    """
    reader = request.reader()
    files = caption_files_read(reader, lambda path: cache.file_digest(path, digest))
    labeller = request.labeller()
    embedder = None
    if request.wants_embedder:
        from auditor.perception.registry import SENTENCE_EMBEDDERS

        embedder = SENTENCE_EMBEDDERS.load(text_embedder, options=load_options or LoadOptions())
    key = _selection_key(request, files, reader, labeller)
    fingerprint = embedder.cache_fingerprint() if embedder is not None else "no sentence embedder"
    result = SelectionResult(
        selections=[], files=files, rows=0, skipped=0, labels=labeller.method,
        text_embedder=embedder.ref.model_copy(update={"spec": text_embedder}) if embedder is not None else None,
    )  # fmt: skip
    cached = cache.get_json(SELECT, fingerprint, key)
    if cached is not None:
        result.selections = [_selection_from_json(item, reader.files) for item in cached["selections"]]
        result.rows, result.skipped = cached["rows"], cached["skipped"]
        result.selected.cached = len(result.selections)
        return result
    embed = _CachedEmbeddings(embedder, cache, result) if embedder is not None else None
    result.selections = select_captions(
        _counted(reader, progress),
        request.occupations,
        request.methods,
        labeller=labeller,
        per_occupation=request.per_occupation,
        seed=request.sample_seed,
        prompts=request.prompts if embedder is not None else None,
        embed=embed,
    )
    result.rows, result.skipped = reader.rows, reader.skipped
    result.selected.computed = len(result.selections)
    index = {str(path): i for i, path in enumerate(reader.files)}
    cache.put_json(
        SELECT,
        fingerprint,
        key,
        {
            "rows": result.rows,
            "skipped": result.skipped,
            "selections": [_selection_json(s, index) for s in result.selections],
        },
    )
    return result


def _counted(reader: CaptionReader, progress: ProgressReporter) -> Iterator[CaptionBatch]:
    """The reader's batches, advancing the ``select`` progress by the captions of each one processed."""
    progress.start(SELECT, None, "reading captions")
    try:
        for batch in reader:
            yield batch
            progress.advance(SELECT, len(batch.captions))
    finally:
        progress.finish(SELECT)


class _CachedEmbeddings:
    """``texts -> unit rows`` through the cache: each text's row is computed once per sentence embedder."""

    def __init__(self, embedder, cache: ContentCache, result: SelectionResult):
        self.embedder = embedder
        self.fingerprint = embedder.cache_fingerprint()
        self.cache = cache
        self.result = result

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        rows: list[np.ndarray | None] = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            hit = self.cache.get(EMBED_CAPTIONS, self.fingerprint, {"text": text})
            if hit is None:
                missing.setdefault(text, []).append(i)
            else:
                rows[i] = np.frombuffer(hit, dtype=np.float32)
                self.result.embedded.cached += 1
        if missing:
            for text, row in zip(missing, self.embedder.embed(list(missing)), strict=True):
                vector = np.asarray(row, dtype=np.float32)
                self.cache.put(EMBED_CAPTIONS, self.fingerprint, {"text": text}, vector.tobytes())
                for i in missing[text]:
                    rows[i] = vector
                self.result.embedded.computed += len(missing[text])
        self.result.embed_seconds += time.perf_counter() - started
        if not rows:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack(rows)  # type: ignore[arg-type]


def _selection_key(
    request: SelectionRequest, files: list[CaptionFile], reader: CaptionReader, labeller: CaptionLabeller
) -> dict:
    """What a whole selection depends on (the sentence embedder is the cache fingerprint)."""
    words = labeller.words
    return {
        "files": [
            {"sha256": f.sha256, "format": f.format, "caption_column": f.caption_column, "image_column": columns[1]}
            for f, columns in zip(files, reader.columns, strict=True)
        ],
        "occupations": request.occupations,
        "methods": list(request.methods),
        "prompts": {o: request.prompts.get(o, []) for o in request.occupations} if request.wants_embedder else {},
        "per_occupation": request.per_occupation,
        "sample_seed": request.sample_seed,
        "labels": labeller.method,
        "words": text_fingerprint(*sorted(words.male), "\0", *sorted(words.female)),
        "names": _package_version("gender-guesser") if labeller.names is not None else None,
    }


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _selection_json(selection: Selection, index: dict[str, int]) -> dict:
    return {
        "occupation": selection.occupation,
        "method": selection.method,
        "prompt": selection.prompt,
        "matched": selection.matched,
        "captions": [[index[c.source], c.row, c.caption, c.image, c.label, c.similarity] for c in selection.captions],
    }


def _selection_from_json(item: dict, files: list[Path]) -> Selection:
    try:
        captions = tuple(
            SelectedCaption(str(files[source]), row, caption, image, label, similarity)
            for source, row, caption, image, label, similarity in item["captions"]
        )
        return Selection(item["occupation"], item["method"], item["prompt"], item["matched"], captions)
    except (KeyError, IndexError, TypeError, ValueError) as exc:  # a cache entry of another layout
        raise AuditorError(
            f"the content cache holds a selection this auditor cannot read ({exc}); clear the cache"
        ) from exc
