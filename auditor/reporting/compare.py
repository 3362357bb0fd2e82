"""``auditor compare``: two runs of the same prompt side by side (two models, or before/after a mitigation).

Axes are matched by name and counterfactuals by their prompt text (case and spacing
ignored); what only one run has is listed as such instead of being dropped. Deltas are
B minus A. BAV is compared as is, on an axis whose counterfactuals both runs share
(relative BAV is relative within one run and so says nothing across runs). Runs that
turn answers into concepts differently get deltas without intervals and no claim. A
counterfactual without CAS or an axis without BAV in a run (no concepts to compare
there) has no delta and reads "no CAS" / "no BAV". The comparison is a plain view, like
the report view, drawn by the terminal, JSON and HTML renderers below.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from auditor.core.console import say_whole
from auditor.core.errors import AuditorError
from auditor.core.store import run_folder_holding
from auditor.core.text import text_key
from auditor.records import INITIAL_PROMPT_ID, AxisScore, GeneratedImage, GenerationSettings, Interval, RunRecord
from auditor.reporting.glossary import METRICS, MetricInfo
from auditor.reporting.numbers import number, with_bounds
from auditor.reporting.sentences import TRY_AGAIN, bounds, error_line, unfinished_note
from auditor.reporting.tables import borderless_table
from auditor.reporting.views import Bounds
from auditor.reporting.wording import Segment, counted, made_by, prompt_segments, quote, setting_text
from auditor.scoring.comparison import NOISE_DIGITS, ChangeIntervals
from auditor.scoring.uncertainty import MIN_SEEDS, too_few_seeds

# --------------------------------------------------------------------------- view


@dataclass(frozen=True)
class RunSide:
    """What identifies one of the two runs."""

    run_id: str
    prompt: str
    status: str
    created_at: str
    t2i: str
    vqa: str
    llm: str
    cas_normalization: str
    initial_images: list[str]
    #: What made each initial image, "seed S" (or "image i" for a backend that takes no seed): the page puts the
    #: images of both runs made alike in one column.
    initial_labels: list[str]


@dataclass(frozen=True)
class CounterfactualDelta:
    """One counterfactual's CAS in both runs and B - A; None where a run lacks it (``only_in``) or has no CAS."""

    prompt: str
    segments: list[Segment]
    cas_a: float | None
    cas_b: float | None
    delta: float | None
    #: The change's interval (both runs resampled, paired over shared seeds), when computed.
    delta_ci: Bounds | None
    only_in: str | None


@dataclass(frozen=True)
class AxisDelta:
    """One axis in both runs: BAV (None where a run has none) and its change, and the aligned counterfactuals."""

    axis: str
    bav_a: float | None
    bav_b: float | None
    delta: float | None
    delta_ci: Bounds | None
    counterfactuals: list[CounterfactualDelta]


@dataclass(frozen=True)
class AxisOnly:
    """An axis only one run has, with its BAV there (None when it has none)."""

    axis: str
    bav: float | None
    counterfactuals: list[str]


@dataclass(frozen=True)
class ComparisonView:
    """Everything ``auditor compare`` shows."""

    a: RunSide
    b: RunSide
    notes: list[str]
    axes: list[AxisDelta]
    only_a: list[AxisOnly]
    only_b: list[AxisOnly]
    metrics: list[MetricInfo]
    #: How the deltas' intervals were made (resamples, level, method, seed, fully_paired, paired_seeds, paired_by);
    #: None without intervals.
    intervals: dict[str, Any] | None = None

    @property
    def prompts(self) -> list[str]:
        """The audited prompt, or both where the runs audited different ones (the title names what is compared)."""
        same = text_key(self.a.prompt) == text_key(self.b.prompt)
        return [self.a.prompt] if same else [self.a.prompt, self.b.prompt]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (``auditor compare --json``)."""
        data = dataclasses.asdict(self)
        data["metrics"] = {m.key: {**dataclasses.asdict(m), "explanation": m.explanation} for m in self.metrics}
        return data


def _side(record: RunRecord) -> RunSide:
    assert record.scores is not None
    initial = next((s for s in record.prompt_sets if s.prompt_id == INITIAL_PROMPT_ID), None)
    return RunSide(
        run_id=record.run_id,
        prompt=record.config.prompt,
        status=record.status,
        created_at=record.created_at.isoformat(timespec="seconds"),
        t2i=record.config.t2i.spec,
        vqa=record.config.vqa.spec,
        llm=record.config.llm,
        cas_normalization=record.scores.cas_normalization,
        initial_images=[image.file for image in initial.images] if initial else [],
        initial_labels=_image_labels(initial.images) if initial else [],
    )


def _image_labels(images: list[GeneratedImage]) -> list[str]:
    """What made each image: "seed S", "seed S (#2)" for its second use where an old record repeats a seed, or
    "image i" from a backend that takes no seed."""
    labels, seen = [], Counter()
    for image in images:
        label = made_by(image)
        seen[label] += 1
        labels.append(label + (f" (#{seen[label]})" if seen[label] > 1 else ""))
    return labels


def _align(prompt: str, a: AxisScore, b: AxisScore, changes: ChangeIntervals | None) -> AxisDelta:
    """One axis of both runs. With ``changes``, deltas are those rescored with their intervals (the shown
    change is the one its interval is about); without, B - A of the recorded values. BAV, a variance over the
    axis's counterfactuals, is compared only when both runs have the same ones."""
    cas_a = {text_key(cf.prompt): cf for cf in a.counterfactuals}
    cas_b = {text_key(cf.prompt): cf for cf in b.counterfactuals}
    order = list(cas_a) + [k for k in cas_b if k not in cas_a]
    rows = []
    for key in order:
        left, right = cas_a.get(key), cas_b.get(key)
        text = (left or right).prompt  # type: ignore[union-attr]
        delta, delta_ci = _change(
            left.cas if left else None, right.cas if right else None, changes.cas.get((a.axis, key)) if changes else None
        )
        rows.append(
            CounterfactualDelta(
                prompt=text,
                segments=prompt_segments(prompt, text),
                cas_a=left.cas if left else None,
                cas_b=right.cas if right else None,
                delta=delta if left and right else None,
                delta_ci=delta_ci if left and right else None,
                only_in=None if left and right else "a" if left else "b",
            )
        )
    delta, delta_ci = _change(a.bav, b.bav, changes.bav.get(a.axis) if changes else None)
    same_counterfactuals = cas_a.keys() == cas_b.keys()
    return AxisDelta(
        axis=a.axis,
        bav_a=a.bav,
        bav_b=b.bav,
        delta=delta if same_counterfactuals else None,
        delta_ci=delta_ci if same_counterfactuals else None,
        counterfactuals=rows,
    )


def _change(
    value_a: float | None, value_b: float | None, rescored: tuple[float | None, Interval] | None
) -> tuple[float | None, Bounds | None]:
    """The delta and its interval: the rescored change where there is one, else B - A of the recorded values."""
    if value_a is None or value_b is None:
        return None, None
    if rescored is None:
        return round(value_b - value_a, NOISE_DIGITS), None  # equal values give exactly 0
    return rescored[0], bounds(rescored[1])


def check_scored(record: RunRecord, label: str, run_dir: Path | None = None) -> None:
    """A run without scores cannot be compared: one line saying how it stands, with its folder (``run_dir``) how it
    ended and what continues it (:func:`~auditor.reporting.sentences.unfinished_note`: a killed run reads as
    stopped, not running)."""
    if record.scores is not None:
        return
    note = unfinished_note(record, run_dir, TRY_AGAIN) if run_dir is not None else None
    if note is None:
        errors = "; ".join(error_line(error) for error in record.errors)
        note = f"it is {record.status}" + (f" ({errors})" if errors else "")
    raise AuditorError(f"run {label} ({record.run_id!r}) has no scores: {note}; compare needs two scored runs")


def compare_records(a: RunRecord, b: RunRecord, changes: ChangeIntervals | None = None) -> ComparisonView:
    """Align two scored runs by axis name and counterfactual text; ``changes`` are the deltas' intervals."""
    check_scored(a, "A")
    check_scored(b, "B")
    notes = []
    differing = _concept_settings_differ(a, b)
    if differing:
        notes.append(
            f"The runs turn answers into concepts differently ({differing}); their CAS and BAV values are not "
            "comparable."
        )
        changes = None
    if (questions := _questions_differ(a, b)) is not None:
        notes.append(
            f"The runs ask the images other questions ({questions}), and every answer makes the concepts: their CAS "
            "and BAV values are not comparable, even of the same images."
        )
        changes = None
    axes_b = {axis.axis: axis for axis in b.scores.axes}
    names_a = {axis.axis for axis in a.scores.axes}
    both = [
        _align(a.config.prompt, axis, axes_b[axis.axis], changes) for axis in a.scores.axes if axis.axis in axes_b
    ]
    both.sort(key=lambda d: -max((v for v in (d.bav_a, d.bav_b) if v is not None), default=-1.0))  # no BAV: last
    if text_key(a.config.prompt) != text_key(b.config.prompt):
        notes.append(
            f"The runs audit different prompts ('{a.config.prompt}' and '{b.config.prompt}'); "
            "only axes and counterfactuals with the same text are compared."
        )
    unlike = [d for d in both if any(cf.only_in for cf in d.counterfactuals)]
    partly = [d.axis for d in unlike if any(cf.only_in is None for cf in d.counterfactuals)]
    apart = [d.axis for d in unlike if d.axis not in partly]
    if partly:
        notes.append(
            f"BAV is not compared on {', '.join(partly)}: the runs have other counterfactuals there, and BAV is "
            "their variance; the CAS values of the counterfactuals both runs have are compared."
        )
    if apart:
        notes.append(f"Nothing is compared on {', '.join(apart)}: no counterfactual of it is in both runs.")
    compared = any(cf.only_in is None for d in both for cf in d.counterfactuals)
    if (settings := settings_differ(a, b)) is not None:
        notes.append(settings)
    if a.config.images_per_prompt != b.config.images_per_prompt:
        notes.append(
            f"Run A drew {counted(a.config.images_per_prompt, 'image')} per prompt and run B "
            f"{b.config.images_per_prompt}; "
            "fewer images give noisier CAS values."
        )
    if not compared:
        notes.append("The runs share no counterfactual, so there is no change to measure.")
    elif changes is None:
        few: dict[int, list[str]] = {}
        for label, run in (("A", a), ("B", b)):
            if run.config.images_per_prompt < MIN_SEEDS:
                few.setdefault(run.config.images_per_prompt, []).append(label)
        reasons = [f"run {' and '.join(labels)}: {too_few_seeds(seeds)}" for seeds, labels in few.items()]
        why = "" if differing or questions else f" ({'; '.join(reasons)})" if reasons else " (--bootstrap 0)"
        notes.append(
            f"Deltas are B minus A, without intervals{why}, so no change is claimed. "
            "Relative BAV is not compared: it is relative within one run."
        )
    else:
        how = _pairing(changes)
        notes.append(
            f"Deltas are B minus A with {changes.settings.level:.0%} intervals from {changes.settings.resamples} "
            f"bootstrap resamples of both runs (--ci-seed {changes.settings.seed}), {how}; a change is coloured only "
            "when its interval excludes 0. "
            "Relative BAV is not compared: it is relative within one run."
        )
    return ComparisonView(
        a=_side(a),
        b=_side(b),
        notes=notes,
        axes=both,
        only_a=[_only(axis) for axis in a.scores.axes if axis.axis not in axes_b],
        only_b=[_only(axis) for axis in b.scores.axes if axis.axis not in names_a],
        metrics=[METRICS["cas"], METRICS["bav"]],
        intervals=None
        if changes is None or not compared
        else {
            "resamples": changes.settings.resamples,
            "level": changes.settings.level,
            "method": "percentile",
            "seed": changes.settings.seed,
            "fully_paired": changes.fully_paired,  # every seed of either run in both: one draw for all
            "paired_seeds": changes.paired_seeds,
            # what paired_seeds counts: seeds, or image positions for two runs whose backends take no seed
            "paired_by": "seed" if all(changes.seeded) else "image position" if not any(changes.seeded) else None,
        },
    )


def _pairing(changes: ChangeIntervals) -> str:
    """How the two runs' seeds (image positions, for two runs whose backend takes no seed) were resampled, in
    words."""
    unseeded = [label for label, seeded in zip("AB", changes.seeded) if not seeded]
    if len(unseeded) == 1:
        return f"independently (run {unseeded[0]}'s backend takes no seed, so no image of it shares the other's noise)"
    unit, units = ("image position", "image positions") if unseeded else ("seed", "seeds")
    if changes.fully_paired:
        return f"paired over their shared {units}" + (" (their backends take no seed)" if unseeded else "")
    if not changes.paired_seeds:
        if not changes.common_seeds:
            return f"independently (the runs share no {unit})"
        return (
            f"independently (pairing over the {changes.common_seeds} {units} they share would leave a single {unit} "
            "in a stratum of its own, which resampling cannot vary)"
        )
    only_a, only_b = changes.unpaired_seeds
    others = " and ".join(f"{count} of run {label}" for label, count in (("A", only_a), ("B", only_b)) if count)
    return f"paired over the {changes.paired_seeds} {units} they share, the other {units} ({others}) independently"


def _concept_settings_differ(a: RunRecord, b: RunRecord) -> str:
    """The settings that change CAS and BAV values (how answers become concept histograms, how CAS is scaled)
    in which the runs differ, in words; '' when none."""
    assert a.scores is not None and b.scores is not None
    settings = {
        "cas_normalization": (a.scores.cas_normalization, b.scores.cas_normalization),
        "include_captions": (a.config.scoring.include_captions, b.config.scoring.include_captions),
        "min_frequency": (a.config.scoring.min_frequency, b.config.scoring.min_frequency),
    }
    return "; ".join(_differences((name, first, second) for name, (first, second) in settings.items()))


def _questions_differ(a: RunRecord, b: RunRecord) -> str | None:
    """How the runs' questions differ ("1 question only in A, 1 only in B"); None when they ask the same. Every
    image's answers to every question make its set's concepts, so other questions give other CAS values from the
    very same images."""
    asked_a, asked_b = _questions(a), _questions(b)
    if asked_a == asked_b:
        return None
    only = [(len(asked_a - asked_b), "A"), (len(asked_b - asked_a), "B")]
    return ", ".join(f"{counted(count, 'question')} only in {run}" for count, run in only if count)


def _questions(record: RunRecord) -> set[str]:
    """What the run asked of every image: its axes' questions and the caption request."""
    if record.plan is None:
        return set()
    return {axis.question for axis in record.plan.axes} | {record.plan.caption_question}


#: Settings of the answers whose change changes them (the images' are GenerationSettings.IMAGE_OPTIONS): a
#: comparison names those that differ.
_PERCEPTION_FIELDS = ("max_new_tokens", "caption_max_new_tokens", "temperature", "instructions", "caption_instructions")


def settings_differ(a: RunRecord, b: RunRecord) -> str | None:
    """The generation and answering settings in which the runs differ, as a note (None when they agree): a change
    of scores may come from them, not from the model (a negative prompt added as a mitigation, other steps). A run
    that read its images from a folder made none, so its images' settings are not known: that is said instead."""
    read = [label for label, run in (("A", a), ("B", b)) if run.config.t2i.backend == "folder"]
    pairs = [
        (name, getattr(a.config.generation, name), getattr(b.config.generation, name))
        for name in GenerationSettings.IMAGE_OPTIONS
        if not read
    ] + [(name, getattr(a.config.perception, name), getattr(b.config.perception, name)) for name in _PERCEPTION_FIELDS]
    differ = _differences(pairs)
    if len(read) == 1:
        differ.insert(0, f"run {read[0]} read its images from a folder, so how they were made is not recorded")
    if not differ:
        return None
    return f"The runs differ in settings that change their images or answers: {'; '.join(differ)}."


def _differences(settings: Iterable[tuple[str, Any, Any]]) -> list[str]:
    """``name 'blurry' in A, default in B`` for each (name, A's value, B's value) that differs, in words."""
    return [
        f"{name} {setting_text(first, quoted=True)} in A, {setting_text(second, quoted=True)} in B"
        for name, first, second in settings
        if first != second
    ]


def _only(axis: AxisScore) -> AxisOnly:
    return AxisOnly(axis=axis.axis, bav=axis.bav, counterfactuals=[cf.prompt for cf in axis.counterfactuals])


# --------------------------------------------------------------------------- terminal


def _delta(value: float | None, ci: Bounds | None, digits: int, lower_is_better: bool | None) -> Text:
    """A signed delta with its interval, green or red (better or worse by the metric's metadata) only
    when the interval excludes 0."""
    if value is None:
        return Text("-")
    text = with_bounds(value, *(ci or (None, None)), digits, signed=True)
    if lower_is_better is None or ci is None or ci[0] <= 0 <= ci[1] or value == 0:
        return Text(text)
    better = value < 0 if lower_is_better else value > 0
    return Text(text, style="green" if better else "red")


def render_comparison_terminal(view: ComparisonView, console: Console) -> None:
    """Print the comparison; readable in 80 columns (prompts wrap)."""
    console.print(Text(f"Comparing runs of {' and '.join(quote(prompt) for prompt in view.prompts)}", style="bold"))
    for label, side in (("A", view.a), ("B", view.b)):
        say_whole(console, Text.assemble((label, "bold"), f" {side.run_id} ({side.status}, {side.created_at})"))
        for kind, spec in (("text-to-image", side.t2i), ("VQA", side.vqa)):  # a local path whole, to copy
            say_whole(console, Text(f"  {kind}: {spec}", style="dim"))
    for note in view.notes:
        console.print(Text("note: ", style="yellow") + Text(note))
    console.print()
    bav_better = METRICS["bav"].lower_is_better
    for axis in view.axes:
        console.print(
            Text.assemble(
                (axis.axis, "bold"),
                f"   BAV A {number(axis.bav_a, 4, missing='no BAV')}   B {number(axis.bav_b, 4, missing='no BAV')}   change ",
                _delta(axis.delta, axis.delta_ci, 4, bav_better),
            )
        )
        table = borderless_table()
        table.add_column("counterfactual", overflow="fold", ratio=1)
        for column in ("CAS A", "CAS B", "B - A"):
            table.add_column(column, justify="right", no_wrap=True)
        for cf in axis.counterfactuals:
            prompt = Text()
            for segment in cf.segments:
                prompt.append(segment.text, style="bold" if segment.changed else None)
            if cf.only_in:
                prompt.append(f" (only in {cf.only_in.upper()})", style="yellow")
            table.add_row(
                prompt,
                number(cf.cas_a, missing="-" if cf.only_in == "b" else "no CAS"),
                number(cf.cas_b, missing="-" if cf.only_in == "a" else "no CAS"),
                _delta(cf.delta, cf.delta_ci, 2, None),
            )
        console.print(table)
        console.print()
    for label, only in (("A", view.only_a), ("B", view.only_b)):
        for axis in only:
            console.print(
                Text.assemble(
                    (f"only in {label}: ", "yellow"), (axis.axis, "bold"), f" (BAV {number(axis.bav, 4, missing='none')}): "
                )
                + Text("; ".join(axis.counterfactuals))
            )
    console.print()
    for metric in view.metrics:
        console.print(Text.assemble((metric.name + ": ", "bold"), metric.explanation))


# --------------------------------------------------------------------------- HTML


def check_page_path(path: Path) -> None:
    """The comparison page's path (``--html``) names a plain file (its folders are made): the page is written beside
    it and renamed over it, which would replace a device or a link there (``/dev/stdout`` with a file), not write
    through it; nor may it replace a run's own file (its record, page or images), only an earlier comparison page.
    ``auditor compare`` asks before its bootstrap."""
    if path.is_dir():
        raise AuditorError(f"--html {path} is a folder; give a file name for the comparison page, e.g. compare.html")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise AuditorError(f"--html {path} is not a plain file; give a file name for the comparison page")
    if path.exists() and not _is_comparison_page(path) and (run_dir := run_folder_holding(path)) is not None:
        raise AuditorError(
            f"--html {path} is a file of the run {run_dir}: write the comparison page elsewhere, or under a new name"
        )


#: The line in a comparison page's head that tells it from a run's own files: ``--html`` may replace it there.
COMPARISON_PAGE_MARK = '<meta name="auditor-page" content="comparison">'


def _is_comparison_page(path: Path) -> bool:
    """Whether ``path`` is a comparison page written earlier (its head, in the first few KiB, has the mark)."""
    try:
        with open(path, "rb") as handle:
            return COMPARISON_PAGE_MARK.encode() in handle.read(4096)
    except OSError:
        return False


def write_comparison_html(view: ComparisonView, path: Path, run_dir_a: Path, run_dir_b: Path) -> Path:
    """Write the comparison page to ``path``; initial images are linked relative to it."""
    from auditor.core.store import atomic_write_text
    from auditor.reporting.html import (
        RUN_A_COLOUR,
        RUN_B_COLOUR,
        Bar,
        ImageLinks,
        bar_chart,
        render_page,
    )

    path = Path(path)
    check_page_path(path)
    page_dir = path.parent.resolve()
    # Runs that share seeds (or image positions) get a column per one of either run, A's first, so the images of
    # both runs made alike line up; runs that share none are two plain rows.
    shared = set(view.a.initial_labels) & set(view.b.initial_labels)
    columns = list(dict.fromkeys([*view.a.initial_labels, *view.b.initial_labels])) if shared else None
    images = {}
    for side, run_dir in (("a", Path(run_dir_a)), ("b", Path(run_dir_b))):
        run, links = getattr(view, side), ImageLinks.between(run_dir, page_dir)
        by_label = {label: links.url(file) for label, file in zip(run.initial_labels, run.initial_images)}
        images[side] = [(label, by_label.get(label)) for label in (columns or run.initial_labels)]
    charts = {}
    for axis in view.axes:
        bars = []
        for cf in axis.counterfactuals:
            label = "".join(s.text for s in cf.segments if s.changed).strip() or cf.prompt
            for side, value, colour in (("A", cf.cas_a, RUN_A_COLOUR), ("B", cf.cas_b, RUN_B_COLOUR)):
                if cf.only_in in (None, side.lower()):  # the run has it: a bar, or "no CAS" without one
                    text = number(value, missing="no CAS")
                    bars.append(Bar(f"{label} ({side})", value, text, f"{cf.prompt}, run {side}", colour))
        charts[axis.axis] = bar_chart(bars, title=f"CAS of {axis.axis}", axis_label="CAS, A and B", scale_max=1.0)
    html = render_page(
        "compare.html.j2",
        view=view,
        images=images,
        image_columns=columns,
        charts=charts,
        colours={"a": RUN_A_COLOUR, "b": RUN_B_COLOUR},
        page_mark=COMPARISON_PAGE_MARK,
    )
    try:
        atomic_write_text(path, html)
    except OSError as exc:
        raise AuditorError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
