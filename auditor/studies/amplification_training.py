"""The training side (T) of the amplification study: the selected captions, their images, and T per selection.

Apart from the run (:mod:`auditor.studies.amplification`) because it is the other half of
the comparison, with its own inputs and bookkeeping: the training sample (which must be
the same bytes on resume), the selected examples' image files, T from their images or,
without ``--image-column``, from their captions' gender words, the warnings about how T
was measured, and the examples file. The generated side is
:mod:`auditor.studies.amplification_generated`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from auditor.core.cache import ContentCache
from auditor.core.errors import StartAgainError
from auditor.core.store import atomic_write_text
from auditor.core.text import first_few
from auditor.corpora.prompts import occupation_prompt
from auditor.corpora.readers import image_path
from auditor.corpora.selection import NN_METHODS, NO_INDICATOR_METHODS, Method, SelectedCaption, Selection
from auditor.records import AmplificationRecord, CaptionFile, CaptionLabels, TrainingSide
from auditor.reporting.wording import counted
from auditor.scoring.amplification import image_counts, share
from auditor.studies.face_stage import ImageFile
from auditor.studies.progress import ProgressReporter

if TYPE_CHECKING:  # pragma: no cover
    from auditor.studies.amplification import AmplificationRun

#: Every selected training example, one JSON object per line, in the run folder.
EXAMPLES_FILE = "training_examples.jsonl"
#: Captions of each selection the record keeps for the report.
EXAMPLES_IN_RECORD = 3
#: Why a training example has no image verdict.
NoImage = Literal["no_image", "missing"]


def check_same_sample(record: AmplificationRecord, files: list[CaptionFile]) -> None:
    """A resumed run must read the same bytes it started with."""
    before = record.training_data
    if before is None:
        return
    if [(f.path, f.sha256) for f in before.files] != [(f.path, f.sha256) for f in files]:
        raise StartAgainError(
            f"the training sample {record.config.captions} is not what this run started with (other files, or "
            "files with other contents); put the files it read back to continue it, or start a new run"
        )


def resolve_training_images(
    selections: list[Selection], cache: ContentCache, progress: ProgressReporter
) -> dict[tuple[str, str | None], ImageFile | NoImage]:
    """Every selected example's image file with its sha256 (memoised), or why it has none."""
    wanted = list(dict.fromkeys((c.source, c.image) for s in selections for c in s.captions))
    resolved: dict[tuple[str, str | None], ImageFile | NoImage] = {}
    stage = "hash training images"
    progress.start(stage, len(wanted), "hashing training images")
    try:
        for source, value in wanted:
            if value is None or not value.strip():
                resolved[source, value] = "no_image"
            else:
                path = image_path(value, Path(source))
                resolved[source, value] = ImageFile(cache.file_digest(path), path) if path.is_file() else "missing"
            progress.advance(stage)
    finally:
        progress.finish(stage)
    return resolved


def _selection_for(study: AmplificationRun, occupation: str, method: Method, template: int | None) -> Selection:
    config = study.record.config
    prompt = None if template is None else occupation_prompt(config.templates[template - 1], occupation)
    return next(s for s in study.selections if s.occupation == occupation and s.method == method and s.prompt == prompt)


def training_sides(study: AmplificationRun) -> list[TrainingSide]:
    config = study.record.config
    sides = []
    for occupation in config.occupations:
        for method in config.methods:
            numbers = range(1, len(config.templates) + 1) if method in NN_METHODS else [None]
            for template in numbers:
                sides.append(_training_side(study, _selection_for(study, occupation, method, template), template))
    return sides


def _training_side(study: AmplificationRun, selection: Selection, template: int | None) -> TrainingSide:
    config = study.record.config
    counts = selection.counts()
    labels = CaptionLabels(**counts)
    if config.image_column is None:
        images = None
        t = share(counts["female"], counts["male"] + counts["female"], config.ci_level)
    else:
        images = image_counts([_example_outcome(study, c) for c in selection.captions])
        t = share(images.woman, images.man + images.woman, config.ci_level)
    return TrainingSide(
        occupation=selection.occupation,
        method=selection.method,
        template=template,
        prompt=selection.prompt,
        matched=selection.matched,
        selected=len(selection.captions),
        labels=labels,
        basis=study.record.basis,
        images=images,
        share=t,
        examples=[c.caption for c in selection.captions[:EXAMPLES_IN_RECORD]],
    )


def _example_outcome(study: AmplificationRun, caption: SelectedCaption) -> tuple[str, str | None]:
    """(face verdict or why there is no image, decision) of one training example."""
    found = study.training_images[caption.source, caption.image]
    if not isinstance(found, ImageFile):
        return found, None
    verdict = study.verdict(found.sha256)
    if verdict is None:
        return "missing", None
    return verdict, study.decision(found.sha256)


def training_warnings(study: AmplificationRun) -> list[str]:
    config = study.record.config
    warnings = []
    if study.record.basis == "caption proxy":
        warnings.append(
            "T is a caption proxy: no --image-column was given, so T is the % female among the selected captions "
            "labelled male or female by their gender words, not the % women in their images (the paper's method)"
            + (
                "; no-indicator selections keep only captions without gender words, so their caption proxy is "
                "undefined by construction"
                if any(m in NO_INDICATOR_METHODS for m in config.methods)
                else ""
            )
        )
    unmatched = [o for o in config.occupations if all(s.matched == 0 for s in study.selections if s.occupation == o)]
    if unmatched:
        warnings.append(f"no caption in the training sample mentions {', '.join(map(repr, unmatched))}")
    if config.names:
        warnings.append(f"caption labels use {study.record.training_data.labels}")
    if config.image_column is not None and (lost := _lost_images(study)):
        warnings.append(
            f"image column: {counted(len(lost), 'training image')} missing or not decodable, left out of T (counted "
            f"as missing): {first_few([repr(value) for value in lost])}"
        )
    return warnings


def _lost_images(study: AmplificationRun) -> list[str]:
    """The image-column values of selected examples whose file is gone or does not decode, in caption order."""
    lost = (c.image for s in study.selections for c in s.captions if _example_outcome(study, c)[0] == "missing")
    return list(dict.fromkeys(value for value in lost if value is not None))


def write_examples(study: AmplificationRun) -> None:
    """Every selected example with its label and, with images, its face verdict and decision."""
    config = study.record.config
    files = {f.path: i for i, f in enumerate(study.record.training_data.files)}
    lines = []
    for side in study.record.training:
        selection = _selection_for(study, side.occupation, side.method, side.template)
        for caption in selection.captions:
            entry = {
                "occupation": side.occupation, "method": side.method, "template": side.template,
                "file": files.get(caption.source), "row": caption.row, "caption": caption.caption,
                "image": caption.image, "label": caption.label, "similarity": caption.similarity,
            }  # fmt: skip
            if config.image_column is not None:
                face, gender = _example_outcome(study, caption)
                found = study.training_images[caption.source, caption.image]
                sha = found.sha256 if isinstance(found, ImageFile) else None
                entry |= {
                    "image_sha256": sha,
                    "face": face,
                    "p_woman": study.p_woman.get(sha or ""),
                    "gender": gender,
                }
            lines.append(json.dumps(entry, ensure_ascii=False))
    atomic_write_text(study.run_dir / EXAMPLES_FILE, "\n".join(lines) + ("\n" if lines else ""))
