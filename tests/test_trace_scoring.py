"""Trace scoring from a hand-made record: per-pair values, the per-stage table, C(o, P), bias scores,
χ² with Holm, dependency groups, and human words kept apart. Every number is computed by hand here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2_contingency

from auditor.core.environment import collect_environment
from auditor.metrics.multiple_testing import holm
from auditor.records import (
    GroupAssignment,
    ImageObjects,
    Interval,
    ModelRef,
    PairSimilarity,
    TraceConfig,
    TraceRecord,
    TraceScoringSettings,
    TraceTriplet,
)
from auditor.scoring.trace import TracedImage, pair_similarity, score_trace, with_detections, with_groups

SIGMA_WORDS = ["man", "men", "people", "person", "woman", "women"]


def _triplet(index: int) -> TraceTriplet:
    prompts = {
        "neutral": "a person with a dog",
        "feminine": "a woman with a dog",
        "masculine": "a man with a dog",
    }
    nouns = {"neutral": ["person", "dog"], "feminine": ["woman", "dog"], "masculine": ["man", "dog"]}
    return TraceTriplet(
        index=index,
        source_id=f"caption-{index}",
        prompts=prompts,
        prompt_ids={name: f"{index}/{name}" for name in prompts},
        nouns=nouns,
        traced_words=nouns,
        subject_words={name: nouns[name][0] for name in prompts},
    )


def _image(counts: dict[str, int], humans: dict[str, int] | None = None, groups=None, hidden=None) -> ImageObjects:
    return ImageObjects(
        image_index=0,
        objects=list(counts),
        humans=list(humans or {}),
        counts=counts,
        human_counts=humans or {},
        groups=groups,
        hidden=hidden,
        hidden_humans=[] if groups is not None else None,
    )


def _record(images: dict[str, ImageObjects], pairs: list[PairSimilarity], **scoring) -> TraceRecord:
    config = TraceConfig(
        t2i=ModelRef(spec="diffusers:x", backend="diffusers"),
        images_per_prompt=1,
        seeds=[0],
        source="captions",
        object_question="List the objects in the image.",
        vqa=ModelRef(spec="blip2:y", backend="blip2"),
        scoring=TraceScoringSettings(**{"bootstrap": 500, "sigma_words": SIGMA_WORDS, **scoring}),
    )
    return TraceRecord(
        run_id="hand",
        config=config,
        triplets=[_triplet(0), _triplet(1)],
        images={pid: [image] for pid, image in images.items()},
        pairs=pairs,
        environment=collect_environment(),
    )


#: C_n = {ball 10, dog 30}, C_f = {bag 30, dog 10}, C_m = {ball 30, dog 20}; human words apart.
IMAGES = {
    "0/neutral": _image({"dog": 10, "ball": 10}, {"person": 1}),
    "0/feminine": _image({"dog": 5, "bag": 20}, {"woman": 1}),
    "0/masculine": _image({"dog": 10, "ball": 20}, {"man": 2}),
    "1/neutral": _image({"dog": 20}),
    "1/feminine": _image({"dog": 5, "bag": 10}, {"woman": 1}),
    "1/masculine": _image({"dog": 10, "ball": 10}, {"man": 1}),
}


def test_counts_bias_scores_and_the_ranking_by_hand():
    record = _record(IMAGES, [], min_count=15)
    score_trace(record)
    assert record.set_sizes == {"neutral": 2, "feminine": 2, "masculine": 2}
    rows = {row.name: row for row in record.objects}
    assert {name: (r.neutral, r.feminine, r.masculine) for name, r in rows.items()} == {
        "bag": (0, 30, 0),
        "ball": (10, 0, 30),
        "dog": (30, 10, 20),
    }
    assert rows["dog"].bias_score == pytest.approx(20 / 30) and rows["ball"].bias_score == 1.0
    assert rows["bag"].bias_score == 0.0
    # Human words never enter the objects, and get their own counts.
    assert {row.name: (row.neutral, row.feminine, row.masculine) for row in record.humans} == {
        "man": (0, 0, 3),
        "person": (1, 0, 0),
        "woman": (0, 2, 0),
    }
    # min_count 15 keeps the objects whose largest count reaches 15: all three here, most masculine first.
    assert [(row.name, row.bias_score) for row in record.ranking] == [
        ("ball", 1.0),
        ("dog", pytest.approx(2 / 3)),
        ("bag", 0.0),
    ]
    # Intervals resample the two triplets; dog's BS is 10/(10+5) in each, so 2/3 in every resample.
    dog = record.ranking[1]
    assert (dog.bias_score_ci.low, dog.bias_score_ci.high) == pytest.approx((2 / 3, 2 / 3))
    # Each ranked object's swap p is Holm-adjusted over the ranking's three (holm is checked by hand elsewhere).
    raw = [row.bias_score_p for row in record.ranking]
    assert None not in raw and [row.bias_score_p_adjusted for row in record.ranking] == pytest.approx(holm(raw))
    assert record.groups is None  # no detector: no dependency groups


def test_chi_square_of_the_triplet_and_pairs_with_holm_by_hand():
    paper = _record(IMAGES, [])
    score_trace(paper)
    assert paper.chi_square[0].note == "3 objects, fewer than 5: χ² not applied (the paper's rule)"
    record = _record(IMAGES, [], min_objects=2)
    score_trace(record)
    tests = record.chi_square
    assert [(t.scope, t.sets) for t in tests] == [
        ("objects", ["neutral", "feminine", "masculine"]),
        ("objects", ["neutral", "feminine"]),
        ("objects", ["neutral", "masculine"]),
        ("objects", ["feminine", "masculine"]),
    ]
    table = np.array([[0, 30, 0], [10, 0, 30], [30, 10, 20]])  # bag, ball, dog x n, f, m
    expected = chi2_contingency(table)
    assert tests[0].statistic == pytest.approx(expected.statistic) and tests[0].dof == 4
    assert tests[0].p_value == pytest.approx(expected.pvalue)
    ran = [t for t in tests if t.p_value is not None]
    # Holm by hand: the i-th smallest of m p-values times (m - i), then a running maximum, capped at 1.
    order = sorted(range(len(ran)), key=lambda i: ran[i].p_value)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, ran[i].p_value * (len(ran) - rank)))
        assert ran[i].p_adjusted == pytest.approx(running)
    assert all(t.note is None or "the χ² approximation is rough there" in t.note for t in ran)
    skipped = [t for t in tests if t.p_value is None]
    assert all("no objects" in t.note for t in skipped)


def test_the_per_stage_table_from_pairs_by_hand():
    pairs = [
        PairSimilarity(triplet=0, image_index=0, neutral_feminine={"prompt_eos": 0.5, "objects": None},
                       neutral_masculine={"prompt_eos": 0.7, "objects": 0.4}),
        PairSimilarity(triplet=1, image_index=0, neutral_feminine={"prompt_eos": 0.6, "objects": None},
                       neutral_masculine={"prompt_eos": 0.9, "objects": None}),
    ]  # fmt: skip
    record = _record(IMAGES, pairs)
    score_trace(record)
    rows = {row.key: row for row in record.similarity}
    eos = rows["prompt_eos"]
    assert (eos.mean_neutral_feminine, eos.mean_neutral_masculine) == pytest.approx((0.55, 0.8))
    assert eos.difference == pytest.approx(0.25) and eos.units == 2 and eos.masculine_closer == 2
    # Two units with d = 0.2 and 0.3: resample means are 0.2, 0.25 or 0.3, so the interval is [0.2, 0.3]; but of
    # the four swaps (none, either, both) two keep |mean| at 0.25 and two give 0.05: swap p = 1/2, so no side.
    assert (eos.ci.low, eos.ci.high) == pytest.approx((0.2, 0.3)) and eos.closer_to == "undecided"
    assert eos.sign_p == pytest.approx(0.5) and eos.swap_p == pytest.approx(0.5)
    objects = rows["objects"]
    assert objects.difference is None and objects.dropped_pairs == 2 and objects.closer_to == "undecided"
    assert rows["denoising_z0"].note.startswith("no pair has this similarity")


def test_pair_values_by_hand():
    def traced(eos, latent, pixels, embedding, counts) -> TracedImage:
        return TracedImage(
            np.array(eos, float), np.array(eos, float), np.array(latent, float), pixels, [embedding], counts
        )

    flat = np.full((16, 16, 3), 100, dtype=np.uint8)
    images = {
        "neutral": traced([1, 0], [[1, 1]], flat, np.array([1.0, 0.0]), {"dog": 1, "cat": 1}),
        "feminine": traced([0, 1], [[1, -1]], flat, None, {}),
        "masculine": traced([1, 1], [[2, 2]], None, np.array([0.6, 0.8]), {"dog": 2}),
    }
    pair = pair_similarity(3, 1, images)
    assert (pair.triplet, pair.image_index) == (3, 1)
    assert pair.neutral_feminine["prompt_eos"] == pytest.approx(0.0)
    assert pair.neutral_masculine["prompt_eos"] == pytest.approx(1 / math.sqrt(2))
    assert pair.neutral_feminine["denoising_z0"] == pytest.approx(0.0)
    assert pair.neutral_masculine["denoising_z0"] == pytest.approx(1.0)
    assert pair.neutral_feminine["image_ssim"] == pytest.approx(1.0)  # identical images
    assert pair.neutral_masculine["image_ssim"] is None  # blacked out by the safety checker
    assert pair.neutral_feminine["image_embedding_0"] is None and pair.neutral_masculine["image_embedding_0"] == 0.6
    assert pair.neutral_feminine["objects"] == 0.0  # no object in the feminine image: nothing shared
    assert pair.neutral_masculine["objects"] == pytest.approx(2 / (math.sqrt(2) * 2))
    # a float16 pipeline's failed image (NaN latents) leaves its pair out of that stage; the run goes on
    images["feminine"] = traced([0, 1], [[np.nan, 1]], flat, None, {})
    assert pair_similarity(3, 1, images).neutral_feminine["denoising_z0"] is None


def test_detections_and_dependency_groups_of_one_image_by_hand():
    image = _image({"dog": 1, "ball": 1}, {"woman": 1})
    found = [("dog", 0.9, (0, 0, 4, 4)), ("woman", 0.8, (4, 0, 10, 10)), ("dog", 0.5, (6, 6, 8, 8))]
    image = with_detections(image, [*found, ("ball", 0.4, (0, 0, 0, 3))])
    assert image.counts == {"ball": 1, "dog": 2} and image.human_counts == {"woman": 1}
    assert [d.human for d in image.detections] == [False, True, False, False]
    from auditor.metrics.dependency_groups import box_mask

    regions = [box_mask(d.box, (10, 10)) for d in image.detections]
    dog_word = np.zeros((10, 10))
    dog_word[0:4, 0:3] = 1.0  # covers 12 of the first dog's 16 pixels: 0.75 > 0.7
    woman_word = np.zeros((10, 10))
    woman_word[0:3, 4:10] = 1.0  # covers 18 of the woman box's 60 pixels: 0.3 > 0.25 (both human words)
    settings = TraceScoringSettings(sigma_words=SIGMA_WORDS)
    grouped = with_groups(
        image, ["woman", "dog", "park"], ["woman"], regions, [("dog", dog_word), ("woman", woman_word)], settings
    )
    assert [(g.name, g.group, g.guided_by, g.human) for g in grouped.groups] == [
        ("dog", "explicitly_guided", "dog", False),
        ("woman", "explicitly_guided", "woman", True),
        ("dog", "explicitly_independent", None, False),
    ]
    assert grouped.groups[0].coverage == pytest.approx(0.75) and grouped.groups[1].sigma == 0.25
    assert grouped.dropped_detections == 1  # the ball's box has no pixels
    assert (grouped.hidden, grouped.hidden_humans) == (["park"], [])


def test_groups_are_summed_per_set_with_human_words_apart():
    def assigned(*items) -> list[GroupAssignment]:
        return [
            GroupAssignment(name=n, group=g, human=h, guided_by=None, coverage=None, sigma=None) for n, g, h in items
        ]

    common = assigned(("tree", "implicitly_independent", False), ("person", "implicitly_guided", True))
    images = {pid: _image({}, groups=common, hidden=["dog"]) for pid in IMAGES}
    images["0/masculine"] = _image({}, groups=assigned(("tie", "implicitly_guided", False)), hidden=[])
    record = _record(images, [])
    record.config.detector = ModelRef(spec="grounding-dino:z", backend="grounding-dino")
    score_trace(record)
    groups = {g.group: g for g in record.groups}
    guided = groups["implicitly_guided"]
    assert [(r.name, r.neutral, r.feminine, r.masculine) for r in guided.objects] == [("tie", 0, 0, 1)]
    assert [(r.name, r.neutral, r.feminine, r.masculine) for r in guided.humans] == [("person", 2, 2, 1)]
    assert guided.images_with == {"neutral": 0, "feminine": 0, "masculine": 1}
    assert groups["hidden"].images_with == {"neutral": 2, "feminine": 2, "masculine": 1}
    assert [(r.name, r.masculine) for r in groups["hidden"].objects] == [("dog", 1)]
    assert [t.scope for t in record.chi_square][4::4] == [
        "explicitly_guided", "implicitly_guided", "explicitly_independent", "implicitly_independent", "hidden"
    ]  # fmt: skip


def test_an_object_leans_only_when_its_interval_excludes_half_and_its_adjusted_swap_test_agrees():
    from auditor.records import ObjectCount
    from auditor.reporting.trace import lean_word

    def row(low: float, high: float, adjusted: float | None, p: float | None = 0.001) -> ObjectCount:
        ci = Interval(low=low, high=high, method="percentile", defined=1.0)
        return ObjectCount(
            name="tie", neutral=0, feminine=1, masculine=9, bias_score=0.9, bias_score_ci=ci, bias_score_p=p,
            bias_score_p_adjusted=adjusted,
        )  # fmt: skip

    assert lean_word(row(0.6, 0.95, 0.01), 0.95) == "masculine"
    assert lean_word(row(0.05, 0.4, 0.049), 0.95) == "feminine"
    assert lean_word(row(0.6, 0.95, 0.05), 0.95) == "unclear"  # two or three triplets never get below 1/4
    assert lean_word(row(0.6, 0.95, 0.05), 0.90) == "masculine"
    assert lean_word(row(0.6, 0.95, 0.2, p=0.01), 0.95) == "unclear"  # small alone, not among its ranking
    assert lean_word(row(0.6, 0.95, None, p=0.01), 0.95) == "masculine"  # scored before the adjustment: as scored
    assert lean_word(row(0.6, 0.95, None, p=None), 0.95) == "unclear"  # scored before the swap test
    assert lean_word(row(0.4, 0.95, 0.001), 0.95) == "unclear"


def test_a_stage_names_a_side_only_when_its_swap_p_stays_below_the_level_once_holm_adjusted_over_the_stages():
    """Six triplets all closer to the masculine prompt: an exact swap p of 2/2^6 = 0.03125 at each stage that has
    them. Alone it names a side; two such stages are adjusted to 0.0625 each, and neither does."""
    def pairs(keys: tuple[str, ...]) -> list[PairSimilarity]:
        return [
            PairSimilarity(triplet=t, image_index=0, neutral_feminine={key: 0.5 for key in keys},
                           neutral_masculine={key: 0.6 + 0.01 * t for key in keys})
            for t in range(6)
        ]  # fmt: skip

    alone = _record(IMAGES, pairs(("prompt_eos",)))
    score_trace(alone)
    eos = {row.key: row for row in alone.similarity}["prompt_eos"]
    assert eos.swap_p == pytest.approx(2 / 64) and eos.swap_p_adjusted == pytest.approx(2 / 64)
    assert eos.closer_to == "masculine"

    both = _record(IMAGES, pairs(("prompt_eos", "prompt_mean")))
    score_trace(both)
    rows = {row.key: row for row in both.similarity}
    for key in ("prompt_eos", "prompt_mean"):
        assert rows[key].swap_p == pytest.approx(2 / 64) and rows[key].swap_p_adjusted == pytest.approx(4 / 64)
        assert rows[key].ci.low > 0 and rows[key].closer_to == "undecided"
    assert rows["denoising_z0"].swap_p is None and rows["denoising_z0"].swap_p_adjusted is None


def masculine_leaning_pairs(triplets: int) -> list[PairSimilarity]:
    """One stage's pairs in which every triplet's neutral prompt is closer to its masculine one."""
    return [
        PairSimilarity(triplet=t, image_index=0, neutral_feminine={"prompt_eos": 0.5},
                       neutral_masculine={"prompt_eos": 0.6 + 0.01 * t})
        for t in range(triplets)
    ]  # fmt: skip


def test_a_record_scored_before_the_adjustments_is_read_as_scored_and_says_so(tmp_path):
    """Its stages keep their stored decisions (made on the raw p) and its objects are read on the raw p too, and
    the terminal and the page say so and how to rescore; a rescored record says Holm instead."""
    from rich.console import Console

    from auditor.reporting.trace import lean_rule, render_trace, write_trace_report

    pairs = masculine_leaning_pairs(6)
    record = _record(IMAGES, pairs, min_count=15)
    score_trace(record)
    old = record.model_copy(
        update={
            "similarity": [row.model_copy(update={"swap_p_adjusted": None}) for row in record.similarity],
            "ranking": [row.model_copy(update={"bias_score_p_adjusted": None}) for row in record.ranking],
        }
    )
    for scored, says in ((record, "Holm-adjusted over the stages"), (old, "Scored before the p-values were adjusted")):
        console = Console(width=200, record=True)
        render_trace(scored, tmp_path, console)
        assert says in console.export_text()
    assert "Holm-adjusted over the 3 ranked objects" in lean_rule(record)
    assert "scored before the p-values were adjusted over the ranking" in lean_rule(old)
    before_swaps = old.model_copy(update={"ranking": [r.model_copy(update={"bias_score_p": None}) for r in old.ranking]})
    assert "scored before the swap test, so it names none" in lean_rule(before_swaps)
    one = _record(IMAGES, pairs[:1], min_count=15)  # one triplet: no swap p anywhere, nothing to adjust, nothing old
    one.triplets = one.triplets[:1]
    score_trace(one)
    assert one.ranking and all(row.bias_score_ci is None and row.bias_score_p is None for row in one.ranking)
    assert one.subject().startswith("trace of 1 triplet from ") and record.subject().startswith("trace of 2 triplets")
    console = Console(width=200, record=True)
    render_trace(one, tmp_path, console)
    shown = console.export_text()
    assert "Scored before" not in shown and "scored before" not in lean_rule(one)
    assert all(row.closer_to == "undecided" for row in one.similarity)  # and the terminal says why, once
    assert shown.count("note: text encoder, EOS: one triplet: no interval, so no side is claimed.") == 1
    assert "note: text encoder, mean, latent z0, SSIM, objects s_O: no pair has this similarity" in shown  # the "–"
    page = write_trace_report(old, tmp_path).read_text()
    assert "scored before\nthe p-values were adjusted over the stages" in page and "once Holm-adjusted" not in page
    # a small difference and its interval share their decimals on the page, as in the terminal's sentence
    small = Interval(low=-0.000126, high=0.000088, method="percentile", defined=1.0)
    row = old.similarity[0].model_copy(update={"difference": 0.000004, "ci": small})
    ranked = old.ranking[0].model_copy(
        update={"bias_score": 0.2, "bias_score_ci": Interval(low=0.001, high=0.3, method="percentile", defined=1.0)}
    )
    page = write_trace_report(old.model_copy(update={"similarity": [row], "ranking": [ranked]}), tmp_path).read_text()
    assert '<td class="num">+0.000004</td><td class="num ci">[-0.000126, +0.000088]</td>' in page
    assert '<td class="num">0.200</td><td class="num ci">[0.001, 0.300]</td>' in page  # a bias score, likewise


def test_an_object_seen_in_one_triplet_has_an_interval_over_only_some_resamples_and_every_report_says_so(tmp_path):
    """A hat in triplet 1's feminine image only: a resample of the two triplets that draws triplet 0 twice (one in
    four) has no hat, so no BS. The interval, [0, 0] from the others, looks certain; the reports say what it is
    over. And the ranking's rule reads "seen 15 times" in the terminal and the page alike."""
    import json

    from rich.console import Console

    from auditor.reporting.trace import render_trace, trace_json, write_trace_report

    images = dict(IMAGES) | {"1/feminine": _image({"dog": 5, "bag": 10, "hat": 15}, {"woman": 1})}
    record = _record(images, [], min_count=15, bootstrap=4000)
    score_trace(record)
    hat = next(row for row in record.ranking if row.name == "hat")
    assert (hat.bias_score_ci.low, hat.bias_score_ci.high) == (0.0, 0.0)
    assert hat.bias_score_ci.defined == pytest.approx(0.75, abs=0.03)
    assert all(row.bias_score_ci.defined == 1.0 for row in record.ranking if row.name != "hat")
    share = f"{math.floor(hat.bias_score_ci.defined * 1000) / 10:g}"
    note = f"hat: the interval is over the {share}% of resamples in which the number exists"
    console = Console(width=80, record=True)
    render_trace(record, tmp_path, console)
    text = " ".join(console.export_text().split())  # wrapped at 80 columns
    assert note in text and "ranked when seen 15 times in a set." in text
    assert note in json.loads(json.dumps(trace_json(record, tmp_path)))["interval_notes"]
    page = write_trace_report(record, tmp_path).read_text()
    assert f"<li>{note}</li>" in page and "Objects are ranked when seen 15 times in a set." in page
    # and beside the interval itself, where a reader looks (the other objects' intervals are over every resample)
    over = f"the interval is over the {share}% of resamples in which the number exists"
    assert f'[0.00, 0.00] <abbr class="meta" title="{over}">({share}%)</abbr></td>' in page
    assert page.count('<abbr class="meta" title="the interval is over the') == page.count(f">({share}%)</abbr>")
    # No pairs were measured: no stage has data, and none is called undecided as if a test had run.
    assert record.similarity and all(row.difference is None for row in record.similarity)
    assert "<td>undecided</td>" not in page and page.count("<td>–</td>") >= len(record.similarity)
    assert not any(line.rstrip().endswith("undecided") for line in console.export_text().splitlines())


def test_too_few_triplets_for_the_swap_test_to_name_a_side_is_said_in_every_report(tmp_path):
    """Three triplets that all lean masculine: the swap test's smallest p is 2/8 = 0.25, so the stage stays
    undecided however clear the lean; the reports say why, and how many triplets it takes (6 for one stage)."""
    import json

    from rich.console import Console

    from auditor.reporting.trace import render_trace, too_few_triplets, trace_json, write_trace_report

    pairs = masculine_leaning_pairs(3)
    record = _record(IMAGES, pairs, min_count=15)
    score_trace(record)
    (stage,) = [row for row in record.similarity if row.swap_p is not None]
    assert stage.swap_p == pytest.approx(0.25) and stage.closer_to == "undecided"
    note = (
        "with 3 triplets no stage can be called closer to either side: the swap test's smallest p is 0.25, "
        "not below 0.05; that takes 6 triplets"
    )
    assert too_few_triplets(record) == note
    console = Console(width=80, record=True)
    render_trace(record, tmp_path, console)
    assert f"note: {note}." in " ".join(console.export_text().split())
    assert json.loads(json.dumps(trace_json(record, tmp_path)))["too_few_triplets"] == note
    page = write_trace_report(record, tmp_path).read_text()
    assert f"{note[:1].upper()}{note[1:]}.".replace("'", "&#39;") in page  # escaped as all text is
    six = _record(IMAGES, masculine_leaning_pairs(6), min_count=15)
    score_trace(six)
    assert too_few_triplets(six) is None  # 2/64 can go below 0.05
    more = {"prompt_mean": 0.1, "denoising_z0": 0.2}
    three_stages = [
        pair.model_copy(update={"neutral_feminine": pair.neutral_feminine | more,
                                "neutral_masculine": pair.neutral_masculine | {k: v + 0.3 for k, v in more.items()}})
        for pair in pairs[:2]
    ]  # fmt: skip
    holm = _record(IMAGES, three_stages, min_count=15)
    score_trace(holm)
    assert "smallest p, Holm-adjusted over the 3 stages, is 1, not below" in too_few_triplets(holm)  # not 3 x 0.5
    few_draws = _record(IMAGES, pairs, min_count=15, bootstrap=40, ci_level=0.99)  # beyond 5 triplets, at random
    score_trace(few_draws)
    assert too_few_triplets(few_draws) == (
        "with 3 triplets no stage can be called closer to either side: the swap test's smallest p is 0.25, not "
        "below 0.01; no number of triplets does with --bootstrap 40 (its p cannot go below 1/41): raise it"
    )


def test_a_chi_square_difference_resting_on_small_expected_counts_is_called_approximate_where_it_is_claimed():
    """The caveat sits in the claim's own sentence, beside each test it concerns, not only in a count before it."""
    from types import SimpleNamespace

    from auditor.records import ChiSquareResult
    from auditor.reporting.trace import chi_square_summary

    def test(adjusted: float, note: str | None) -> ChiSquareResult:
        return ChiSquareResult(scope="objects", sets=["neutral", "feminine"], objects=4, statistic=9.0, dof=3,
                               p_value=adjusted / 2, p_adjusted=adjusted, smallest_expected=1.0, note=note)  # fmt: skip

    record = SimpleNamespace(
        chi_square=[test(0.001, None), test(0.02, "3 of 8 expected counts below 5")],
        config=SimpleNamespace(scoring=SimpleNamespace(alpha=0.05)),
    )
    said = chi_square_summary(record)
    assert "1 of them had expected counts below 5" in said
    assert "(adjusted p = 0.001)" in said and "(adjusted p = 0.02, approximate)" in said


def test_the_settings_the_page_shows_read_as_given_and_escaped(tmp_path):
    """The trace page's "settings as recorded" is JSON a person reads: a caption file named ``o'b&<x>.csv`` reads so
    (escaped as any text), not as ``o\\u0027b\\u0026\\u003cx\\u003e.csv``, as Jinja's ``tojson`` (made for scripts)
    writes it."""
    import html

    from auditor.reporting.trace import write_trace_report

    record = _record(IMAGES, [])
    record.config.captions = "o'b&<x>.csv"
    page = write_trace_report(record, tmp_path).read_text(encoding="utf-8")
    settings = page.split("settings as recorded")[1].split("</pre>")[0]
    assert "o&#39;b&amp;&lt;x&gt;.csv" in settings and "<x>" not in settings and "\\u00" not in settings
    assert '"captions": "o\'b&<x>.csv"' in html.unescape(settings)
