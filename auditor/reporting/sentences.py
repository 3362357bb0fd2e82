"""The sentences a person reads: what each axis's numbers say, the headline, the notes.

Sentences only say what the numbers in the record say; they compute no score.
"""

from __future__ import annotations

from auditor.records import AssociationResult, AxisScore, CounterfactualScore, RunRecord
from auditor.reporting.views import AssociationView, AxisView
from auditor.reporting.wording import quote


def axis_finding(prompt: str, axis: str, scores: list[CounterfactualScore]) -> str:
    """One plain sentence on which counterfactual the initial images resemble, with the CAS values.

    Counterfactuals without a CAS are left out of the comparison and named at the end.
    """
    if not scores:
        return f"No counterfactuals of {axis} were scored."
    known = [(s.prompt, s.cas) for s in scores if s.cas is not None]
    missing = [s.prompt for s in scores if s.cas is None]
    if not known:
        return f"No {axis} counterfactual has a CAS: there were no concepts to compare (see the notes)."
    if len(known) == 1:
        [(only, cas)] = known
        finding = (
            f"Only {quote(only)} has a CAS among the {axis} counterfactuals ({cas:.2f}), "
            "so there is nothing to compare it with."
        )
    else:
        counted = f"{len(known)} {axis} counterfactuals" + (" with a CAS" if missing else "")
        finding = _compared(f"Images for {quote(prompt)}", counted, known)
    if missing:
        names = " and ".join(quote(text) for text in missing)
        one = len(missing) == 1
        finding += f" {names} {'has' if one else 'have'} no CAS (no concepts in {'its' if one else 'their'} images)."
    return finding


def _compared(subject: str, counted: str, pairs: list[tuple[str, float]]) -> str:
    """The sentence for two or more ``(counterfactual prompt, CAS)`` pairs."""
    high, low = max(cas for _, cas in pairs), min(cas for _, cas in pairs)
    if high == 0:
        return f"{subject} share no concepts with any of the {counted} (every CAS is 0.00)."
    if high - low < 0.005:
        return f"{subject} resemble all {counted} about equally (CAS {high:.2f})."
    most = " and ".join(quote(prompt) for prompt, cas in pairs if high - cas < 0.005)
    least = " and ".join(quote(prompt) for prompt, cas in pairs if cas - low < 0.005)
    if len(pairs) == 2:
        return f"{subject} resemble {most} (CAS {high:.2f}) more than {least} ({low:.2f})."
    return f"{subject} resemble {most} most (CAS {high:.2f}) and {least} least ({low:.2f}) of the {counted}."


def association_view(result: AssociationResult, scores: list[CounterfactualScore]) -> AssociationView:
    first, second = (scores[0].prompt, scores[1].prompt) if len(scores) >= 2 else (None, None)
    toward = first if result.association > 0 else second if result.association < 0 else None
    d = "undefined" if result.effect_size is None else f"{result.effect_size:.2f} ({result.effect_label})"
    numbers = f"S = {result.association:+.3f}, d = {d}, p = {result.p_value:.3g}"
    subject = "The initial images' embeddings lean towards"
    if result.effect_size is None:
        sentence = (
            "The initial images' association scores have no spread within the groups, so the size of any lean "
            f"is undefined ({numbers})."
        )
    elif toward is None or result.effect_label == "negligible":
        pair = f"neither {quote(first)} nor {quote(second)}" if first and second else "neither counterfactual"
        sentence = f"{subject} {pair} more than a balanced mix of both does ({numbers})."
    else:
        sentence = f"{subject} {quote(toward)} more than a balanced mix of both counterfactuals does ({numbers})."
    return AssociationView(
        association=result.association,
        effect_size=result.effect_size,
        effect_label=result.effect_label,
        p_value=result.p_value,
        exact=result.exact,
        permutations=result.permutations,
        n_x=result.n_x,
        n_y=result.n_y,
        first=first,
        second=second,
        toward=toward,
        sentence=sentence,
    )


def bav_note(score: AxisScore) -> str | None:
    """Why an axis has no BAV (fewer than two CAS values), short enough for a ranking row; None when it has one."""
    if score.bav is not None:
        return None
    if len(score.counterfactuals) == 1:
        return "no BAV: the axis has one counterfactual"
    count = sum(cf.cas is not None for cf in score.counterfactuals)
    has = f"{'only ' if count else ''}{count or 'none'} of {len(score.counterfactuals)} counterfactuals"
    return f"no BAV: {has} {'has' if count <= 1 else 'have'} a CAS"


#: How each run status reads in a sentence ("This run ...").
STATUS_PHRASES = {
    "running": "is still running (or stopped without recording why)",
    "completed": "completed",
    "failed": "failed",
    "interrupted": "was interrupted",
}


def headline(record: RunRecord, axes: list[AxisView]) -> str:
    if record.scores is None:
        stage = next((e.stage for e in record.errors if e.stage), None)
        where = f" at the {stage} stage" if stage else ""
        return f"This run {STATUS_PHRASES[record.status]}{where} and has no scores; below is what it finished."
    if not axes:
        return "The run was scored but has no axes."
    top = axes[0]
    if top.bav is None:  # axes without BAV rank last, so none has one
        if all(cf.cas is None for axis in axes for cf in axis.counterfactuals):
            return (
                "No counterfactual has a CAS: the images gave no concepts to compare (see the notes), "
                "so no axis can be ranked."
            )
        return "No axis has a BAV: none has two counterfactuals with a CAS (see the notes), so none can be ranked."
    if top.bav == 0:
        return "No axis leans: every axis's counterfactuals got equal CAS values."
    return f"The axis that leans most is {top.name} (BAV {top.bav:.4f}). {top.finding}"


def notes(record: RunRecord) -> list[str]:
    notes = []
    if record.status != "completed":
        notes.append(f"This run {STATUS_PHRASES[record.status]}.")
    if record.scores is not None:
        notes += list(record.scores.warnings)
        for axis in record.scores.axes:
            for cf in axis.counterfactuals:
                notes += [f"{axis.axis}, {quote(cf.prompt)}: {w}" for w in cf.warnings]
    flagged = sum(image.flagged_nsfw for s in record.prompt_sets for image in s.images)
    if flagged:
        notes.append(f"{flagged} images were blacked out by the safety checker and left out of the concepts.")
    return notes
