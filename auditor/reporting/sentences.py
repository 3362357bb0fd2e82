"""The sentences a person reads: what each axis's numbers say, the headline, the notes.

Sentences only say what the numbers in the record support; they compute no score. A
claim needs evidence recorded beside the number:

* "resembles A more than B" only when the interval of CAS(A) - CAS(B) excludes 0;
  otherwise "no clear difference" with that interval;
* "leans most" only when the top axis's BAV interval lies above every other axis's;
  otherwise the tied axes are listed;
* a T2IAT direction only when its p-value, adjusted for the run's other axes (Holm),
  is below alpha;
* a male/female lean only when its interval excludes 0.

A run recorded without intervals (``--bootstrap 0``, fewer than 4 images per prompt set, or written
before intervals existed) gets its numbers stated and no difference claimed; the
uncertainty line says why (and, where it can, that ``auditor score RUN`` prints them; it stores nothing).
"""

from __future__ import annotations

import builtins
import math
from pathlib import Path

from auditor.metrics.ties import same_score
from auditor.records import (
    AssociationResult,
    AxisScore,
    CounterfactualScore,
    Interval,
    RunError,
    RunRecord,
    Scores,
    ScoringSettings,
    StudyRecord,
)
from auditor.reporting.numbers import number, p_equals, with_bounds, with_span, written_apart
from auditor.reporting.status import running_now, status_wording
from auditor.reporting.views import AssociationView, AxisView, Bounds
from auditor.reporting.wording import plan_notes, quote, resampled
from auditor.scoring.uncertainty import MIN_SEEDS, too_few_seeds

#: How corrections for multiple tests read in a sentence.
CORRECTION_NAMES = {"holm": "Holm", "benjamini-hochberg": "Benjamini-Hochberg"}
#: Said where a claim would need an interval the run does not have.
NO_INTERVAL = "no interval was computed, so no difference is claimed"
NO_RANKING = "no interval was computed, so no ranking is claimed"


def axis_finding(prompt: str, axis: str, score: AxisScore) -> str:
    """One plain sentence on which counterfactual the initial images resemble, claimed only with evidence.

    The evidence is the interval of CAS(top) - CAS(bottom) (``score.spread``). Counterfactuals
    without a CAS are left out of the comparison and named at the end.
    """
    scores = score.counterfactuals
    if not scores:
        return f"No counterfactuals of {axis} were scored."
    known = [s for s in scores if s.cas is not None]
    missing = [s.prompt for s in scores if s.cas is None]
    if not known:
        return f"No {axis} counterfactual has a CAS: there were no concepts to compare (see the notes)."
    if len(known) == 1:
        finding = (
            f"Only {quote(known[0].prompt)} has a CAS among the {axis} counterfactuals ({number(known[0].cas)}), "
            "so there is nothing to compare it with."
        )
    else:
        counted = f"{len(known)} {axis} counterfactuals" + (" with a CAS" if missing else "")
        finding = _compared(f"Images for {quote(prompt)}", counted, known, score)
    if missing:
        names = " and ".join(quote(text) for text in missing)
        one = len(missing) == 1
        finding += f" {names} {'has' if one else 'have'} no CAS (no concepts in {'its' if one else 'their'} images)."
    return finding


def _compared(subject: str, counted: str, known: list[CounterfactualScore], score: AxisScore) -> str:
    """The sentence for two or more counterfactuals with a CAS, gated on the top - bottom interval."""
    by_id = {cf.prompt_id: cf for cf in known}
    spread = score.spread
    if spread is None or spread.first not in by_id or spread.second not in by_id:
        values = ", ".join(f"{quote(cf.prompt)} {number(cf.cas)}" for cf in known)
        return f"CAS of the {counted}: {values} ({NO_INTERVAL})."
    top, bottom = by_id[spread.first], by_id[spread.second]
    if spread.ci is None or spread.ci.low is None:
        return (
            f"{subject} have the highest CAS with {quote(top.prompt)} ({number(top.cas)}) and the lowest with "
            f"{quote(bottom.prompt)} ({number(bottom.cas)}); {NO_INTERVAL}."
        )
    value, low, high = written_apart(spread.value, spread.ci.low, spread.ci.high, signed=True)
    evidence = f"difference {value}, {method_name(spread.ci)} interval [{low}, {high}]"
    if not spread.ci.excludes(0):
        pair = f"{quote(top.prompt)} ({number(top.cas)}) and {quote(bottom.prompt)} ({number(bottom.cas)})"
        if len(known) == 2:
            return f"No clear difference between {pair}: {evidence}."
        if all(same_score(cf.cas, top.cas) for cf in known):  # no highest or lowest to name
            return f"No clear difference among the {counted}: all have CAS {number(top.cas)} ({evidence})."
        highest = f"{quote(top.prompt)} ({number(top.cas)}, {_rank(top, known, 'highest')})"
        lowest = f"{quote(bottom.prompt)} ({number(bottom.cas)}, {_rank(bottom, known, 'lowest')})"
        return f"No clear difference among the {counted}: between {highest} and {lowest}, {evidence}."
    if len(known) == 2:
        return (
            f"{subject} resemble {quote(top.prompt)} (CAS {number(top.cas)}) more than {quote(bottom.prompt)} "
            f"({number(bottom.cas)}; {evidence})."
        )
    # The interval tests this pair only: the others are not claimed to lie between them (ties are named).
    return (
        f"{subject} resemble {quote(top.prompt)} (CAS {number(top.cas)}, {_rank(top, known, 'highest')}) more than "
        f"{quote(bottom.prompt)} ({number(bottom.cas)}, {_rank(bottom, known, 'lowest')}) of the {counted} ({evidence})."
    )


def _rank(chosen: CounterfactualScore, known: list[CounterfactualScore], rank: str) -> str:
    """``the highest``, or ``the highest with 'X'`` when other counterfactuals have the same CAS."""
    tied = [cf for cf in known if cf is not chosen and same_score(cf.cas, chosen.cas)]
    return f"the {rank}" + (f" with {' and '.join(quote(cf.prompt) for cf in tied)}" if tied else "")


def method_name(interval: Interval) -> str:
    """How the interval was made, as a reader says it ("percentile", "BCa")."""
    return "BCa" if interval.method == "bca" else "percentile"


def lean_sentence(score: AxisScore) -> str | None:
    """Which gender version the images look more like, claimed only when the lean's interval excludes 0."""
    if score.lean is None:
        return None
    value = with_span(score.lean, score.lean_ci, signed=True)
    if score.lean_ci is None or score.lean_ci.low is None:
        return f"{value} ({NO_INTERVAL})"
    if not score.lean_ci.excludes(0):
        return f"{value}: no clear lean towards either version"
    return f"{value}: the images look more like the {'male' if score.lean > 0 else 'female'} version"


#: What a lean the permutation p claims is qualified with where S's interval over seeds reaches 0: p asks whether
#: these images could be regrouped into as large a difference, the interval whether other seeds' images would
#: still show one.
OTHER_SEEDS_CAVEAT = "S's interval over seeds reaches 0: images of other seeds may not lean so"


def seeds_reach_zero(result: AssociationResult) -> bool:
    """Whether S has an interval over seeds and it reaches 0 (:data:`OTHER_SEEDS_CAVEAT`)."""
    interval = result.association_ci
    return interval is not None and interval.low is not None and interval.high is not None and not interval.excludes()


def association_view(
    result: AssociationResult, scores: list[CounterfactualScore], alpha: float | None, correction: str
) -> AssociationView:
    """The T2IAT association of an axis with its sentence: a direction only when the adjusted p < alpha."""
    first, second = (scores[0].prompt, scores[1].prompt) if len(scores) >= 2 else (None, None)
    toward = first if result.association > 0 else second if result.association < 0 else None
    d = "undefined" if result.effect_size is None else f"{number(result.effect_size)} ({result.effect_label})"
    p_adjusted = result.p_adjusted if result.p_adjusted is not None else result.p_value
    level = alpha if alpha is not None else 0.05
    method = CORRECTION_NAMES.get(correction, correction)
    adjusted = f", {method}-adjusted p {p_equals(p_adjusted)}" if correction != "none" else ""
    numbers = f"S = {association_span(result, 3)}, d = {d}, p {p_equals(result.p_value)}{adjusted}"
    subject = "The initial images' embeddings lean towards"
    if result.effect_size is None:
        sentence = f"The initial images' {why_no_effect_size(result)}, so the size of any lean is undefined ({numbers})."
    elif toward is None or p_adjusted >= level:
        pair = f"{quote(first)} or {quote(second)}" if first and second else "either counterfactual"
        sentence = f"No clear lean of the initial images' embeddings towards {pair} ({numbers}; not below {level:g})."
    else:
        sentence = f"{subject} {quote(toward)} more than a balanced mix of both counterfactuals does ({numbers})."
        if seeds_reach_zero(result):
            sentence += f" But {OTHER_SEEDS_CAVEAT}."
    return AssociationView(
        association=result.association,
        association_ci=bounds(result.association_ci),
        effect_size=result.effect_size,
        effect_label=result.effect_label,
        p_value=result.p_value,
        p_adjusted=result.p_adjusted,
        exact=result.exact,
        permutations=result.permutations,
        n_x=result.n_x,
        n_y=result.n_y,
        first=first,
        second=second,
        toward=toward if sentence.startswith(subject) else None,
        sentence=sentence,
    )


def bounds(interval: Interval | None) -> Bounds | None:
    """``(low, high)`` of an interval with both bounds, for views; else None."""
    if interval is None or interval.low is None or interval.high is None:
        return None
    return (interval.low, interval.high)


def bav_note(score: AxisScore) -> str | None:
    """Why an axis has no BAV (fewer than two CAS values), short enough for a ranking row; None when it has one."""
    if score.bav is not None:
        return None
    if len(score.counterfactuals) == 1:
        return "no BAV: the axis has one counterfactual"
    count = sum(cf.cas is not None for cf in score.counterfactuals)
    has = f"{'only ' if count else ''}{count or 'none'} of {len(score.counterfactuals)} counterfactuals"
    return f"no BAV: {has} {'has' if count <= 1 else 'have'} a CAS"


def status_phrase(record: StudyRecord, run_dir: Path) -> str:
    """How the run's status reads in a sentence ("This run ..."): a ``running`` record is told apart by whether a
    process runs it now, as ``auditor runs`` tells it."""
    return status_wording(record.status, running_now(record, run_dir))


#: What a note on a run a process runs now adds where what it finished so far is shown, and where nothing is.
SHOWN_SO_FAR = "what it has finished so far is shown"
TRY_AGAIN = "try again once it has ended"


def unfinished_note(record: StudyRecord, run_dir: Path, while_running: str = SHOWN_SO_FAR) -> str | None:
    """For a run that did not complete: how it ended, where (its last error) and the command that continues it, e.g.
    ``this run did not complete (interrupted at generate); auditor batch --resume runs/b continues it``, or that a
    new run is needed where a resume would stop the same way; for one a process runs now, that it does (a resume
    would be refused), and ``while_running`` (:data:`TRY_AGAIN` where an error shows nothing). None for a
    completed run."""
    if record.status == "completed":
        return None
    alive = running_now(record, run_dir)
    if alive:
        return f"this run is running now: {while_running}"
    error = _stated_error(record)
    where = ""
    if error is not None:
        where = f" at {error.stage}" + (f": {error.message}" if error.message else "")
    how = "stopped without recording why" if alive is False else record.status
    return f"this run did not complete ({how}{where}); {next_step(record, run_dir)}"


def next_step(record: StudyRecord, run_dir: Path) -> str:
    """What goes on from a run that did not complete: the command that continues it, or a new run where a resume
    would stop the same way (:meth:`~auditor.records.StudyRecord.fails_again_on_resume`)."""
    if record.fails_again_on_resume():
        return "a resume would stop the same way: start a new run"
    return f"{record.resume_command(run_dir)} continues it"


def _stated_error(record: StudyRecord) -> RunError | None:
    """The error :func:`unfinished_note` states: the last, when it names its stage."""
    last = record.errors[-1] if record.errors else None
    return last if last is not None and last.stage else None


def unstated_errors(record: StudyRecord, unfinished: str | None) -> list[RunError]:
    """The errors a page lists under ``unfinished`` (:func:`unfinished_note`, None for a completed run): those the
    note does not already state (one for a run that ended at a stage: the note says where and why)."""
    stated = _stated_error(record) if unfinished is not None else None
    return [error for error in record.errors if error is not stated]


def error_line(error: RunError) -> str:
    """One recorded error as reports say it: the stage, then the message. The exception's type only for one of
    Python's own (``ValueError: ...``), whose message may need it; auditor's errors, interruptions and a library's
    errors say what happened in their message, and a type name (``KeyboardInterrupt``) reads like a traceback."""
    builtin = isinstance(getattr(builtins, error.type, None), type) and error.type != KeyboardInterrupt.__name__
    message = f"{error.type}: {error.message}" if builtin and error.message else error.message or error.type
    return f"{error.stage or 'run'}: {message}"


def headline(record: RunRecord, axes: list[AxisView], status: str) -> str:
    """The report's first sentence: which axis leans most, only when its BAV interval sets it apart (``status``:
    how the run's status reads, :func:`status_wording`, for a run without scores)."""
    if record.scores is None:
        stage = next((e.stage for e in record.errors if e.stage), None)
        where = f" at the {stage} stage" if stage else ""
        return f"This run {status}{where} and has no scores; below is what it finished."
    if not axes:
        return "The run was scored but has no axes."
    ranked = [axis for axis in axes if axis.bav is not None]  # axes without BAV rank last
    if not ranked:
        if all(cf.cas is None for axis in axes for cf in axis.counterfactuals):
            return (
                "No counterfactual has a CAS: the images gave no concepts to compare (see the notes), "
                "so no axis can be ranked."
            )
        return "No axis has a BAV: none has two counterfactuals with a CAS (see the notes), so none can be ranked."
    top = ranked[0]
    if top.bav == 0:
        return "No axis leans: every axis's counterfactuals got equal CAS values."
    if len(ranked) == 1:
        return f"Only {top.name} has a BAV ({_bav(top)}). {top.finding}"
    if top.bav_ci is None:
        if len(equal := _equal_to_top(ranked)) > 1:
            names = " and ".join([", ".join(axis.name for axis in equal[:-1]), equal[-1].name])
            return f"The axes with the largest BAV are {names} ({number(top.bav, 4)} each); {NO_RANKING}."
        return f"The axis with the largest BAV is {top.name} ({number(top.bav, 4)}); {NO_RANKING}."
    tied = _tied(ranked)
    if not tied:
        return f"The axis that leans most is {top.name} (BAV {_bav(top)}). {top.finding}"
    names = ", ".join(axis.name for axis in [top, *tied])
    each = "; ".join(f"{axis.name} {_bav(axis)}" for axis in [top, *tied])
    return f"No single axis leans most: the BAV intervals of {names} overlap ({each})."


def _equal_to_top(ranked: list[AxisView]) -> list[AxisView]:
    """The first-ranked axes: the top one and those that tie with it (equal relative BAV and BAV)."""
    return [axis for axis in ranked if axis.rank == ranked[0].rank]


def _tied(ranked: list[AxisView]) -> list[AxisView]:
    """The axes after the top one (``ranked[0]``, which has an interval) whose BAV interval reaches it, or that
    have none: the axes it is not set apart from."""
    top = ranked[0]
    assert top.bav_ci is not None
    return [axis for axis in ranked[1:] if axis.bav_ci is None or axis.bav_ci[1] >= top.bav_ci[0]]


def top_axis_phrase(axes: list[AxisView]) -> str:
    """What the first-ranked axis is, gated as the headline is, for a section that starts from it: "the axis that
    leans most" only where the headline says so."""
    ranked = [axis for axis in axes if axis.bav is not None]
    if not ranked:
        return "the first axis listed (no axis has a BAV)"
    top = ranked[0]
    if top.bav == 0:
        return "the first axis listed (no axis leans: every BAV is 0)"
    if len(ranked) == 1:
        return "the only axis with a BAV"
    if top.bav_ci is None:
        if len(equal := _equal_to_top(ranked)) > 1:
            others = ", ".join(axis.name for axis in equal[1:])
            return f"one of the axes with the largest BAV (tied with {others}; {NO_RANKING})"
        return f"the axis with the largest BAV ({NO_RANKING})"
    if tied := _tied(ranked):
        others = ", ".join(axis.name for axis in tied)
        return f"the axis with the largest BAV (its interval overlaps that of {others}: not clearly the one that leans most)"
    return "the axis that leans most"


def _bav(axis: AxisView) -> str:
    """An axis's BAV with its interval, ``0.0123 [0.0050, 0.0210]``."""
    low, high = axis.bav_ci if axis.bav_ci else (None, None)
    return with_bounds(axis.bav, low, high, 4)


def intervals_asked(scoring: ScoringSettings) -> str:
    """The intervals a study's settings ask of each audit, for a page's facts (a batch, an exploration): level,
    method, resamples and the seed that draws them."""
    return f"{_intervals(scoring.ci_level, scoring.ci_method, scoring.bootstrap)} (--ci-seed {scoring.ci_seed})"


def _intervals(level: float, method: str, resamples: int) -> str:
    """``95% percentile intervals from 1000 paired-bootstrap resamples``."""
    name = "BCa" if method == "bca" else "percentile"
    return f"{level:.0%} {name} intervals from {resamples} paired-bootstrap resamples"


#: What a CAS interval cannot show, said wherever CAS values carry intervals (the README's "read them with care").
CAS_INTERVAL_CAVEAT = (
    "A single CAS is biased low at small sizes, so its interval can miss its large-sample value (even lie below its "
    "own estimate); the findings rest on CAS differences, BAV and adjusted p-values, in which these biases largely "
    "cancel."
)


def uncertainty_line(scores: Scores, seeds: int, seeded: bool = True) -> str | None:
    """How the intervals and adjusted p-values were made, for the report's settings; without intervals, why
    (``seeds``: images per prompt set; ``seeded``: whether a seed made each, else the resamples are of image
    positions)."""
    parts = []
    if scores.intervals is not None:
        i = scores.intervals
        parts.append(
            f"{_intervals(i.level, i.method, i.resamples)} of the {resampled(i.seeds, seeded)} "
            f"(drawn with --ci-seed {i.seed})"
        )
    elif seeds < MIN_SEEDS:
        parts.append(f"no intervals ({too_few_seeds(seeds, seeded)})")
    else:
        parts.append("no intervals (`auditor score RUN` prints them; it does not store them in the run)")
    if scores.correction != "none":
        name = CORRECTION_NAMES.get(scores.correction, scores.correction)
        parts.append(f"T2IAT p-values {name}-adjusted across the axes, alpha {scores.alpha:g}")
    return "; ".join(parts)


def notes(record: RunRecord) -> list[str]:
    """The prompt audit report's notes. How the run ended is not among them: the headline says it of a run without
    scores, the page's banner and the terminal's notes of one with scores."""
    notes = []
    if record.embedder_skipped is not None:
        notes.append(
            f"No embedding scores: the default image embedder could not be loaded ({record.embedder_skipped})."
        )
    if record.plan is not None:
        notes += plan_notes(record.plan)
    if record.scores is not None:
        notes += list(record.scores.warnings)
        for axis in record.scores.axes:
            for cf in axis.counterfactuals:
                notes += [f"{axis.axis}, {quote(cf.prompt)}: {w}" for w in cf.warnings]
        notes += interval_notes(record.scores)
    flagged = sum(image.flagged_nsfw for s in record.prompt_sets for image in s.images)
    if flagged:
        notes.append(f"{flagged} images were blacked out by the safety checker and left out of the concepts.")
    return notes


def named_intervals(scores: Scores) -> list[tuple[str, Interval]]:
    """Every interval of the scores with what it is of, in words."""
    named: list[tuple[str, Interval | None]] = []
    for axis in scores.axes:
        named += [(f"{axis.axis}, {quote(cf.prompt)}: the CAS interval", cf.cas_ci) for cf in axis.counterfactuals]
        named += [
            (f"{axis.axis}: the {name} interval", ci)
            for name, ci in (
                ("BAV", axis.bav_ci),
                ("BAV (MAD)", axis.bav_mad_ci),
                ("relative BAV", axis.relative_bav_ci),
                ("lean", axis.lean_ci),
            )
        ]
    return [(what, ci) for what, ci in named if ci is not None]


def interval_notes(scores: Scores) -> list[str]:
    """Each interval that is not what the scores' method line says: a BCa interval that fell back to the
    percentile one (and why), or one over only the resamples in which its number exists."""
    notes = []
    for what, ci in named_intervals(scores):
        if ci.note:
            notes.append(f"{what} is a {ci.method} interval (BCa could not be used: {ci.note})")
        if (partial := partial_interval_note(ci)) is not None:
            notes.append(f"{what} {partial}")
    return notes


def why_no_effect_size(result: AssociationResult) -> str:
    """Why d is undefined, as a clause: too few images to measure a spread (either deviation needs three),
    or association scores with no spread within the groups (the pooled sd) or at all (the combined sd)."""
    if result.n_x + result.n_y < 3:
        return f"association scores are too few to measure a spread: {result.n_x + result.n_y} in all, and d needs 3"
    return "association scores have no spread" + (" within the groups" if result.effect_size_sd == "pooled" else "")


def association_span(result: AssociationResult, digits: int) -> str:
    """S with its interval, e.g. ``+0.0123 [+0.0050, +0.0190]``, saying when the interval is over only the resamples
    in which S exists (a draw of seeds that leaves a group without an image has none)."""
    text = with_span(result.association, result.association_ci, digits, signed=True)
    partial = None if result.association_ci is None else partial_interval_note(result.association_ci)
    return text if partial is None else f"{text} (the interval {partial})"


def partial_interval_note(ci: Interval) -> str | None:
    """``is over the 52.3% of resamples in which the number exists`` for an interval drawn from only some of the
    resamples (a number undefined in the others, e.g. an effect size where a draw has no spread); else None."""
    share = defined_share(ci)
    return None if share is None else f"is over the {share} of resamples in which the number exists"


def defined_share(ci: Interval | None) -> str | None:
    """``52.3%``: the share of resamples an interval is drawn from, where the number is undefined in the others;
    None for an interval over all of them (or none)."""
    if ci is None or not 0 < ci.defined < 1:
        return None
    return f"{math.floor(round(ci.defined * 1000, 6)) / 10:g}%"  # rounded down: 99.96% of them is not "100%"
