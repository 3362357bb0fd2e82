"""Reports of an exploration: the live round table, the terminal report, ``--json`` and ``report.html``.

They read the record only. The leaderboard ranks every scored arm by its exploration score
(best first); the top K carry their confirmation on fresh seeds. A finding is stated only for
a confirmed arm: its direction held on seeds it was not chosen on, with a Benjamini-Hochberg
adjusted p-value below alpha. Exploration scores are biased upward for the arms that won
(they were picked because they scored high), so the held-out numbers are the ones to quote.
Text from prompts, the LLM and the VQA model goes into ``Text`` objects and autoescaped HTML.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from auditor.core.console import say_whole
from auditor.core.store import run_files, run_files_text
from auditor.records import Arm, Candidate, Confirmation, ExploreRecord, Interval, Round
from auditor.reporting.glossary import METRICS
from auditor.reporting.numbers import decimals, number, p_equals, p_value, with_span
from auditor.reporting.ranking import Ranked, rank_with_ties
from auditor.reporting.sentences import intervals_asked, unfinished_note
from auditor.reporting.tables import WRAPPED_VALUE_WIDTH, borderless_table
from auditor.reporting.wording import Segment, counted, dropped_axes_summary, made_by, prompt_segments, quote

#: Rows of the terminal leaderboard (the JSON and HTML have them all).
TERMINAL_ROWS = 15
#: Images per prompt set in the HTML strips.
STRIP_IMAGES = 8

#: What each stop reason means, for people.
STOP_REASONS = {
    "max_images": "the image budget (--max-images) is spent",
    "max_llm_calls": "the LLM budget (--max-llm-calls) is spent",
    "max_prompts": "the prompt budget (--max-prompts) is spent",
    "time": "the time budget (--time) is spent",
    "separated": "the top arms are separated from all others",
    "exhausted": "nothing was left to explore",
}


@dataclass(frozen=True)
class Row(Ranked):
    """One arm of the leaderboard as the reports show it; arms with equal exploration scores tie."""

    arm: Arm
    candidate: Candidate

    @property
    def images(self) -> int:
        """Images its exploration score rests on (every prompt set, ``seeds`` each)."""
        plan = self.candidate.plan
        sets = 1 + len(next(a for a in plan.axes if a.name == self.arm.axis).counterfactuals) if plan else 0
        return self.arm.seeds * sets

    @property
    def confirmed(self) -> bool:
        return self.arm.confirmation is not None and self.arm.confirmation.confirmed


def leaderboard(record: ExploreRecord) -> list[Row]:
    """Every scored arm, highest exploration score first, ranked from 1 (arms that got no images yet are
    :func:`unscored_note`'s). Arms with equal scores tie: which comes first is the record's order, not the
    images', so they share a rank."""
    by_id = {c.candidate_id: c for c in record.candidates}
    scored = [arm for arm in record.arms if arm.score is not None]
    ranked = rank_with_ties(scored, lambda arm: (arm.score.value,))
    return [Row(rank, tied, arm, by_id[arm.candidate_id]) for rank, tied, arm in ranked]


def unscored_arms(record: ExploreRecord) -> list[tuple[Candidate, Arm]]:
    """The arms no round gave images yet (the run stopped first), with their candidates, in the record's order."""
    by_id = {c.candidate_id: c for c in record.candidates}
    return [(by_id[arm.candidate_id], arm) for arm in record.arms if arm.score is None]


def unscored_note(record: ExploreRecord) -> str | None:
    """The arms the leaderboard leaves out because they have no score yet, named (None when every arm has one): a
    leaderboard of fewer rows than the summary's arms would otherwise read as if they had been dropped."""
    found = unscored_arms(record)
    if not found:
        return None
    named = "; ".join(f"{quote(candidate.prompt)} ({arm.axis})" for candidate, arm in found)
    have = "has" if len(found) == 1 else "have"
    return f"{counted(len(found), 'arm')} {have} no images and no score yet, so no place on the leaderboard: {named}."


def cut_tie_note(record: ExploreRecord, rows: list[Row]) -> str | None:
    """The arms that tie with one sent to confirmation but were not sent themselves (``--top`` took the first of
    the tied arms in the run's order), named; None when the arms sent cut no tie. Their order says nothing, so a
    reader should not take the ones left out for weaker."""
    confirmed_ranks = {row.rank for row in rows if row.arm.confirmation is not None}
    left = [row for row in rows if row.arm.confirmation is None and row.rank in confirmed_ranks]
    if not left:
        return None
    named = "; ".join(f"{quote(row.candidate.prompt)} ({row.arm.axis})" for row in left)
    return (
        f"--top {record.config.top_k} cut a tie: {named} {'ties' if len(left) == 1 else 'tie'} with an arm sent to "
        "confirmation but got no fresh seeds (of tied arms, the first in the run's order were sent)."
    )


def _bounds(interval: Interval | None) -> list[float | None] | None:
    return None if interval is None else interval.bounds()


# --------------------------------------------------------------------------- sentences


def held_out_difference(confirmation: Confirmation, alpha: float) -> str:
    """The held-out difference with the evidence its one-sided test rests on: ``+0.050, one-sided 95% lower bound
    +0.004``. The two-sided interval at that level may reach below 0 while p is below alpha, so beside "Confirmed"
    it would contradict the claim; a record written before lower bounds gets it all the same."""
    if confirmation.difference_lower_bound is None:
        return with_span(confirmation.difference, confirmation.difference_ci, signed=True)
    places = decimals([confirmation.difference, confirmation.difference_lower_bound], 2)
    return (
        f"{number(confirmation.difference, places, signed=True)}, one-sided {(1 - alpha) * 100:g}% lower bound "
        f"{number(confirmation.difference_lower_bound, places, signed=True)}"
    )


def finding(row: Row, record: ExploreRecord) -> str | None:
    """The sentence of a top arm's confirmation, claiming the direction only when it was confirmed."""
    confirmation = row.arm.confirmation
    if confirmation is None:
        return None
    subject = f"{quote(row.candidate.prompt)} ({row.arm.axis})"
    if confirmation.score is None or confirmation.difference is None:
        return f"{subject} was not confirmed: {confirmation.note or 'no test was possible'}."
    prompts = {cf.prompt_id: cf.prompt for cf in confirmation.score.axis.counterfactuals}
    first, second = quote(prompts[confirmation.first]), quote(prompts[confirmation.second])
    difference = f"CAS difference {held_out_difference(confirmation, record.config.scoring.alpha)}"
    q = confirmation.p_adjusted
    test = "one-sided BCa" if confirmation.test_method == "bca" else "one-sided"
    tested = ""
    if q is not None:
        tested = f"{test} p {p_equals(confirmation.p_value)}, Benjamini-Hochberg adjusted {p_value(q)}"
    fresh = f"on {confirmation.seeds} fresh seeds"
    if confirmation.confirmed:
        return (
            f"Confirmed: images for {subject} resemble {first} more than {second} {fresh} "
            f"({difference}; {tested} < {record.config.scoring.alpha:g})."
        )
    return (
        f"Not confirmed: {subject} led in exploration, but {fresh} the images do not clearly resemble {first} more "
        f"than {second} ({difference}; {tested}, not below {record.config.scoring.alpha:g})."
    )


def summary(record: ExploreRecord) -> str:
    """What the run did and, once a stop rule stopped it, why (how a run that did not complete ended, its
    :func:`~auditor.reporting.sentences.unfinished_note` says)."""
    rounds = sum(1 for r in record.rounds if r.phase == "explore")
    accepted = sum(c.accepted for c in record.candidates)
    rejected = len(record.candidates) - accepted
    ending = ""
    if (stop := STOP_REASONS.get(record.stop_reason or "")) is not None:
        ending = f" Stopped because {stop}" + (f": {record.stop_detail}." if record.stop_detail else ".")
    return (
        f"{counted(rounds, 'round')} over {counted(accepted, 'accepted candidate prompt')} ({rejected} more "
        f"rejected) and {counted(len(record.arms), 'arm')}; "
        f"{record.images_spent} of {record.config.max_images} images spent ({record.images_reused} reused from the "
        f"cache), {record.llm_calls} LLM requests.{ending}"
    )


def dropped_axes(record: ExploreRecord) -> str | None:
    """The ``--axes`` that candidates' plans left out, summed up in one line for the report (each was said on the
    terminal only as it was planned)."""
    plans = [c.plan.dropped_axes for c in record.candidates if c.plan is not None]
    return dropped_axes_summary(plans, "planned candidate")


# --------------------------------------------------------------------------- JSON


def duplicate_guard(record: ExploreRecord) -> str:
    """How the guard told a near-duplicate proposal, in words: it decided which candidates were explored, and
    without the default sentence embedder it fell back to exact matching, which the record keeps the reason of."""
    config = record.config
    if config.text_embedder is not None:
        return f"{config.text_embedder.spec}, cosine above {config.duplicate_threshold:g} to an earlier candidate"
    exact = "exact match (case, spacing and punctuation ignored)"
    if record.text_embedder_skipped is not None:
        return f"{exact}: the default sentence embedder could not be loaded ({record.text_embedder_skipped})"
    return f"{exact}, as --text-embedder none asked"


def explore_json(record: ExploreRecord, run_dir: Path | None = None) -> dict[str, Any]:
    """What ``auditor explore --json`` prints: the leaderboard best first, spend and stop reason."""
    rows = leaderboard(record)
    data: dict[str, Any] = {"kind": "explore"}
    if run_dir is not None:
        data |= run_files(run_dir)
    return data | {
        "status": record.status,
        "objective": record.config.objective,
        "stop_reason": record.stop_reason,
        "stop_detail": record.stop_detail,
        "images_spent": record.images_spent,
        "max_images": record.config.max_images,
        "images_reused": record.images_reused,
        "llm_calls": record.llm_calls,
        "rounds": sum(1 for r in record.rounds if r.phase == "explore"),
        "dropped_axes": dropped_axes(record),
        "duplicate_guard": duplicate_guard(record),
        "leaderboard": [_row_json(row) for row in rows],
        "cut_tie": cut_tie_note(record, rows),
        "unscored": [
            {"arm": arm.arm_id, "prompt": candidate.prompt, "axis": arm.axis, "state": arm.state}
            for candidate, arm in unscored_arms(record)
        ],
        "findings": [text for row in rows if (text := finding(row, record)) is not None],
        "rejected": [
            {"candidate": c.candidate_id, "prompt": c.prompt, "rejected_for": c.rejected_for, "reason": c.reason}
            for c in record.candidates
            if not c.accepted
        ],
    }


def _row_json(row: Row) -> dict[str, Any]:
    arm, confirmation = row.arm, row.arm.confirmation
    return {
        "rank": row.rank,
        "tied": row.tied,
        "prompt": row.candidate.prompt,
        "axis": arm.axis,
        "score": arm.score.value,
        "ci": _bounds(arm.score.ci),
        "images": row.images,
        "seeds": arm.seeds,
        "confirmed": row.confirmed,
        "arm": arm.arm_id,
        "state": arm.state,
        "confirmation": None
        if confirmation is None
        else {
            "score": confirmation.score.value if confirmation.score else None,
            "ci": _bounds(confirmation.score.ci) if confirmation.score else None,
            "seeds": confirmation.seeds,
            "first": confirmation.first,
            "second": confirmation.second,
            "difference": confirmation.difference,
            "difference_ci": _bounds(confirmation.difference_ci),
            "difference_lower_bound": confirmation.difference_lower_bound,
            "p_value": confirmation.p_value,
            "test_method": confirmation.test_method,
            "p_adjusted": confirmation.p_adjusted,
            "note": confirmation.note,
        },
    }


# --------------------------------------------------------------------------- terminal


def round_table(record: ExploreRecord) -> RenderableType:
    """The live view: round, arms alive, images spent / budget, and the current top K with intervals."""
    explored = [r for r in record.rounds if r.phase == "explore"]
    alive = sum(1 for arm in record.arms if arm.state == "alive")
    head = Text(
        f"round {len(explored)}  ·  arms alive {alive} of {len(record.arms)}  ·  images {record.images_spent} / "
        f"{record.config.max_images}  ·  LLM requests {record.llm_calls}",
        style="bold",
    )
    rows = leaderboard(record)[: record.config.top_k]
    if not rows:  # before any arm is scored: no header over an empty table
        return head
    return Group(head, _leaderboard_table(rows, record, confirmation=False))


def _leaderboard_table(rows: list[Row], record: ExploreRecord, *, confirmation: bool) -> Table:
    table = borderless_table()
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("prompt", overflow="fold", ratio=1, min_width=12)
    table.add_column("axis", no_wrap=True)
    # A score and its interval may wrap between the two, so no column is dropped at 80 columns.
    table.add_column(
        record.config.objective if record.config.objective == "bav" else "|lean|", min_width=WRAPPED_VALUE_WIDTH
    )
    table.add_column("seeds", justify="right", no_wrap=True)
    if confirmation:
        table.add_column("fresh seeds", min_width=WRAPPED_VALUE_WIDTH)
        table.add_column("adj. p", justify="right", no_wrap=True)
    for row in rows:
        cells: list[Text | str] = [
            row.place,
            Text(row.candidate.prompt),
            Text(row.arm.axis),
            with_span(row.arm.score.value, row.arm.score.ci, 4),
            str(row.arm.seeds),
        ]
        if confirmation:
            c = row.arm.confirmation
            held = "-" if c is None or c.score is None else with_span(c.score.value, c.score.ci, 4)
            q = "-" if c is None or c.p_adjusted is None else p_value(c.p_adjusted) + (" ✓" if c.confirmed else "")
            cells += [held, q]
        table.add_row(*cells)
    return table


def render_explore(record: ExploreRecord, run_dir: Path, console: Console) -> None:
    """The terminal report: what ran and why it stopped, the leaderboard, the findings, the rejections."""
    console.print(Text(f"Exploration {record.run_id}: {record.subject()}", style="bold"))
    console.print(Text(summary(record)))
    if (unfinished := unfinished_note(record, run_dir)) is not None:
        say_whole(console, unfinished)
    if dropped := dropped_axes(record):
        console.print(Text(dropped))
    rows = leaderboard(record)
    if rows:
        label = "BAV" if record.config.objective == "bav" else "|CAS(male) - CAS(female)|"
        confirming = record.config.confirm_images > 0  # --confirm-images 0: no held-out columns to fill
        held_out = (
            "; 'fresh seeds': the same score on held-out seeds, 'adj. p': the Benjamini-Hochberg adjusted p of its "
            "direction there"
        )
        heading = f"\nLeaderboard (by {label} in exploration, with its interval{held_out if confirming else ''})"
        console.print(Text(heading, style="bold"))
        console.print(_leaderboard_table(rows[:TERMINAL_ROWS], record, confirmation=confirming))
        if len(rows) > TERMINAL_ROWS:
            console.print(Text(f"... and {len(rows) - TERMINAL_ROWS} more arms in report.html and --json"))
    for note in (cut_tie_note(record, rows), unscored_note(record)):
        if note is not None:
            console.print(Text(note))
    sentences = [text for row in rows if (text := finding(row, record)) is not None]
    if sentences:
        console.print(Text("\nFindings", style="bold"))
        for sentence in sentences:
            console.print(Text(f"- {sentence}"))
    rejected = [c for c in record.candidates if not c.accepted]
    if rejected:
        console.print(Text(f"\nRejected candidates ({len(rejected)})", style="bold"))
        for candidate in rejected:
            console.print(Text(f"- {candidate.candidate_id} {quote(candidate.prompt)}: {candidate.reason}"))
    console.print(Text(f"Near-duplicates: {duplicate_guard(record)}"))
    console.print(Text("\nWhat the numbers mean", style="bold"))
    for key in ("arm_score", "difference", "p_adjusted"):
        console.print(Text(f"- {METRICS[key].name}: {METRICS[key].explanation}"))
    say_whole(console, run_files_text(run_dir))


# --------------------------------------------------------------------------- HTML


@dataclass(frozen=True)
class LineageNode:
    """A candidate in the lineage tree, with the candidates that mutate it."""

    candidate: Candidate
    best: Arm | None
    children: list[LineageNode]


def lineage(record: ExploreRecord) -> list[LineageNode]:
    """Candidates as a forest: roots are those without a (known) parent, children in the order proposed."""
    ids = {c.candidate_id for c in record.candidates}
    best: dict[str, Arm] = {}
    for row in leaderboard(record):
        best.setdefault(row.candidate.candidate_id, row.arm)

    def node(candidate: Candidate) -> LineageNode:
        children = [c for c in record.candidates if c.parent == candidate.candidate_id]
        return LineageNode(candidate, best.get(candidate.candidate_id), [node(c) for c in children])

    return [node(c) for c in record.candidates if c.parent is None or c.parent not in ids]


@dataclass(frozen=True)
class Strip:
    """One prompt set's row of images in an arm's strips; ``segments`` mark the words its counterfactual changed."""

    segments: list[Segment]
    cells: list[Any]


def _strips(record: ExploreRecord, rows: list[Row], run_dir: Path) -> dict[str, list[Strip]]:
    """Arm id -> one strip per prompt set of each top arm (the candidate's own prompt first): its first
    exploration images."""
    from auditor.reporting.html import ImageLinks, thumbnail
    from auditor.scoring.arms import arm_prompts, set_id

    sets = {prompt_set.prompt_id: prompt_set for prompt_set in record.prompt_sets}
    links = ImageLinks.between(run_dir, run_dir)
    strips = {}
    for row in rows:
        lines = []
        for prompt_id, prompt in arm_prompts(row.candidate, row.arm.axis).items():
            found = sets.get(set_id(row.candidate.candidate_id, prompt_id))
            images = [image for image in (found.images if found else []) if image.index < row.arm.seeds][:STRIP_IMAGES]
            segments = prompt_segments(row.candidate.prompt, prompt) if lines else [Segment(prompt, False)]
            lines.append(Strip(segments, [thumbnail(image, prompt, links, made_by(image)) for image in images]))
        strips[row.arm.arm_id] = lines
    return strips


def _columns(lines: list[Strip]) -> list[str]:
    """The column heads of an arm's image strips: each column's seed (its index for a backend that takes none)."""
    widest = max((line.cells for line in lines), key=len, default=[])
    return [f"image {cell.index}" if cell.seed is None else f"seed {cell.seed}" for cell in widest]


def _round_images(current: Round) -> str:
    """Where a round's images came from. A finished round's charged images that it did not generate were found in
    the cache after it was planned: made by an attempt cut short (a resume) or by another run sharing the cache."""
    text = f"{current.images_charged} charged, {current.images_generated} generated, {current.images_reused} reused"
    earlier = current.images_charged - current.images_generated
    if current.status == "done" and earlier > 0:
        text += f"; {earlier} charged images were made by an interrupted attempt or another run sharing the cache"
    return text


def _spend_chart(record: ExploreRecord):
    from auditor.reporting.html import Bar, bar_chart

    bars = [
        Bar(
            f"round {r.round}" + (" (confirm)" if r.phase == "confirm" else ""),
            float(r.images_spent),
            f"{r.images_spent} (+{r.images_charged})",
            _round_images(r),
        )
        for r in record.rounds
    ]
    return bar_chart(
        bars,
        title="Images spent over rounds",
        axis_label=f"images charged to --max-images {record.config.max_images} (cumulative; + this round)",
        scale_max=float(record.config.max_images),
    )


def write_explore_report(record: ExploreRecord, run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (atomically) and return its path."""
    from auditor.reporting.html import write_run_page

    run_dir = Path(run_dir)
    rows = leaderboard(record)
    top = [row for row in rows if row.arm.confirmation is not None] or rows[: record.config.top_k]
    strips = _strips(record, top, run_dir)
    return write_run_page(
        run_dir,
        "explore.html.j2",
        record=record,
        rows=rows,
        top=top,
        strips=strips,
        strip_columns={arm_id: _columns(lines) for arm_id, lines in strips.items()},
        findings=[(row, text) for row in rows if (text := finding(row, record)) is not None],
        summary=summary(record),
        unfinished=unfinished_note(record, run_dir),
        intervals=intervals_asked(record.config.scoring),
        unscored=unscored_note(record),
        cut_tie=cut_tie_note(record, rows),
        dropped_axes=dropped_axes(record),
        duplicate_guard=duplicate_guard(record),
        lineage=lineage(record),
        spend=_spend_chart(record),
        stop_reasons=STOP_REASONS,
        held_out_difference=partial(held_out_difference, alpha=record.config.scoring.alpha),
    )
