"""Amplification scores as records: G/T pairing per method and template, A, flips, and the summaries by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from auditor.records import CaptionLabels, GeneratedSide, ImageCounts, TrainingSide
from auditor.reporting.amplification import finding
from auditor.scoring.amplification import amplification_rows, share, summaries

LEVEL = 0.95


def _counts(woman: int, man: int) -> ImageCounts:
    n = woman + man
    return ImageCounts(images=n, no_face=0, many_faces=0, small_face=0, kept=n, man=man, woman=woman, ambiguous=0)


def _g(occupation: str, template: int, woman: int, man: int) -> GeneratedSide:
    return GeneratedSide(
        occupation=occupation, template=template, prompt_id=f"{occupation}/p{template}", prompt=f"{occupation} {template}",
        counts=_counts(woman, man), share=share(woman, woman + man, LEVEL),
    )  # fmt: skip


def _t(occupation: str, method: str, template: int | None, woman: int, man: int) -> TrainingSide:
    return TrainingSide(
        occupation=occupation, method=method, template=template, prompt=None if template is None else "p",
        matched=woman + man, selected=woman + man, labels=CaptionLabels(male=0, female=0, both=0, none=woman + man),
        basis="images", images=_counts(woman, man), share=share(woman, woman + man, LEVEL),
    )  # fmt: skip


#: G per (occupation, template) as (women, men); T per (occupation, method[, template]).
GENERATED = {("ceo", 1): (1, 9), ("ceo", 2): (2, 8), ("nurse", 1): (9, 1), ("nurse", 2): (7, 3), ("tutor", 1): (8, 2),
             ("tutor", 2): (0, 0)}  # fmt: skip
TRAINING = {("ceo", "keyword"): (3, 7), ("nurse", "keyword"): (6, 4), ("tutor", "keyword"): (3, 7),
            ("ceo", "nn", 1): (2, 8), ("ceo", "nn", 2): (4, 6), ("nurse", "nn", 1): (8, 2), ("nurse", "nn", 2): (9, 1),
            ("tutor", "nn", 1): (4, 6), ("tutor", "nn", 2): (4, 6)}  # fmt: skip
OCCUPATIONS = ["ceo", "nurse", "tutor"]


def _sides():
    generated = [_g(o, k, *counts) for (o, k), counts in GENERATED.items()]
    training = [_t(key[0], key[1], key[2] if len(key) == 3 else None, *counts) for key, counts in TRAINING.items()]
    return generated, training


def test_rows_pair_g_with_the_methods_t_by_hand():
    generated, training = _sides()
    rows = amplification_rows(
        generated, training, OCCUPATIONS, ["keyword", "nn"], 2, resamples=200, seed=0, level=LEVEL
    )
    by = {(r.method, r.template, r.occupation): r for r in rows}
    assert [(r.method, r.template, r.occupation) for r in rows][:4] == [
        ("keyword", 1, "ceo"), ("keyword", 1, "nurse"), ("keyword", 1, "tutor"), ("keyword", 2, "ceo"),
    ]  # fmt: skip
    # ceo, keyword, prompt 1: G = 10, T = 30 -> A = |10 - 50| - |30 - 50| = 40 - 20 = 20; both below 50.
    ceo = by["keyword", 1, "ceo"]
    assert (ceo.generated.percent, ceo.training.percent, ceo.amplification, ceo.flipped) == (10, 30, 20, False)
    assert ceo.amplification_ci.low <= 20 <= ceo.amplification_ci.high
    # nurse, keyword, prompt 2: G = 70, T = 60 -> 20 - 10 = 10.
    assert by["keyword", 2, "nurse"].amplification == pytest.approx(10)
    # tutor flips on prompt 1 (G 80 vs T 30): A = 30 - 20 = 10.
    tutor = by["keyword", 1, "tutor"]
    assert tutor.amplification == pytest.approx(10) and tutor.flipped is True
    # No generated image classified for tutor on prompt 2: no A, and the note says why.
    missing = by["keyword", 2, "tutor"]
    assert missing.amplification is None and missing.flipped is None and missing.amplification_ci is None
    assert missing.note == "no image was generated"
    # nn's T follows the template: ceo prompt 2 uses T = 40 -> A = 30 - 10 = 20.
    assert by["nn", 2, "ceo"].training.percent == 40 and by["nn", 2, "ceo"].amplification == pytest.approx(20)


def test_a_missing_g_says_whether_the_face_filter_or_the_thresholds_left_every_image_out():
    """Which a person would change: the images (or the model) when no image kept one large face, --threshold when
    every kept image was ambiguous."""
    generated, training = _sides()
    filtered = ImageCounts(images=4, flagged_nsfw=1, no_face=2, many_faces=0, small_face=1, kept=0, man=0, woman=0,
                           ambiguous=0)  # fmt: skip
    ambiguous = ImageCounts(images=4, no_face=1, many_faces=0, small_face=0, kept=3, man=0, woman=0, ambiguous=3)
    one = ImageCounts(images=1, no_face=0, many_faces=0, small_face=0, kept=1, man=0, woman=0, ambiguous=1)
    for counts, note in (
        (filtered, "the face filter kept none of the 4 generated images (2 no face, 1 a face too small, 1 blacked "
                   "out by the safety checker)"),
        (ambiguous, "all 3 generated images the face filter kept were ambiguous (between the thresholds)"),
        (one, "the one generated image the face filter kept was ambiguous (between the thresholds)"),
    ):  # fmt: skip
        sides = [
            g.model_copy(update={"counts": counts, "share": share(0, 0, LEVEL)}) if (g.occupation, g.template) ==
            ("ceo", 1) else g for g in generated
        ]  # fmt: skip
        rows = amplification_rows(sides, training, OCCUPATIONS, ["keyword"], 2, resamples=20, seed=0, level=LEVEL)
        ceo = next(r for r in rows if (r.occupation, r.template) == ("ceo", 1))
        assert ceo.amplification is None and ceo.note == note


def test_a_missing_t_says_whether_no_caption_was_selected_or_none_was_classified():
    generated, training = _sides()
    nobody = [t if (t.occupation, t.method) != ("tutor", "keyword") else _t("tutor", "keyword", None, 0, 0)
              for t in training]  # fmt: skip
    unread = [t.model_copy(update={"selected": 5}) if t.selected == 0 else t for t in nobody]
    for sides, note in ((nobody, "no caption of the training sample mentions 'tutor'"),
                        (unread, "no selected training image was classified man or woman")):  # fmt: skip
        rows = amplification_rows(generated, sides, OCCUPATIONS, ["keyword"], 2, resamples=20, seed=0, level=LEVEL)
        tutor = next(r for r in rows if (r.occupation, r.template) == ("tutor", 1))
        assert tutor.amplification is None and tutor.note == note


def test_summaries_per_template_and_over_templates_by_hand():
    generated, training = _sides()
    rows = amplification_rows(generated, training, OCCUPATIONS, ["keyword"], 2, resamples=500, seed=0, level=LEVEL)
    table = summaries(
        rows, OCCUPATIONS, ["keyword"], 2, "images", exclude_flips=False, resamples=500, seed=0, level=LEVEL
    )
    assert [(s.method, s.template) for s in table] == [("keyword", 1), ("keyword", 2), ("keyword", None)]
    first, second, every = table
    # Prompt 1: ceo 20, nurse |90-50| - |60-50| = 30, tutor 10.
    assert first.mean == pytest.approx(20) and first.occupations == 3 and first.flipped == ["tutor"]
    t = ttest_1samp([20, 30, 10], 0.0)
    assert (first.t_statistic, first.p_value) == pytest.approx((t.statistic, t.pvalue))
    assert first.mean_ci.low <= 20 <= first.mean_ci.high
    # Prompt 2: ceo |20-50| - 20 = 10, nurse 10; tutor has no A.
    assert second.mean == pytest.approx(10) and second.missing == ["tutor"] and second.t_statistic is None
    # Its interval is [10, 10] (no spread): the sentence claims nothing and names no t-test it did not run.
    assert (second.mean_ci.low, second.mean_ci.high) == pytest.approx((10, 10))
    said = finding(second)
    assert "no clear amplification" in said and "a direction needs the t-test too" in said and "p is not" not in said
    # Every prompt: each occupation's A averaged over the prompts first, only occupations with A on both.
    assert every.mean == pytest.approx(np.mean([(20 + 10) / 2, (30 + 10) / 2])) and every.missing == ["tutor"]
    # tutor flips wherever it has an A, so it "flips everywhere"; nobody is excluded without --exclude-flips.
    assert every.flipped == ["tutor"] and every.excluded == []


def test_exclude_flips_leaves_out_occupations_that_flip_on_every_template():
    generated, training = _sides()
    rows = amplification_rows(generated, training, OCCUPATIONS, ["keyword"], 2, resamples=200, seed=0, level=LEVEL)
    table = summaries(
        rows, OCCUPATIONS, ["keyword"], 2, "images", exclude_flips=True, resamples=200, seed=0, level=LEVEL
    )
    first = table[0]
    assert first.excluded == ["tutor"] and first.occupations == 2 and first.mean == pytest.approx(25)
    # the sentence under the table names who is not in the mean, so "over 2 occupations" of 3 asked is explained
    said = finding(first)
    assert "over 2 occupations; tutor left out by --exclude-flips (G and T lean to opposite sides); one-sample" in said
    assert finding(table[-1]).startswith("keyword, all prompts: ")  # the row the README calls "all"


def test_share_is_a_percentage_with_its_wilson_interval():
    from auditor.metrics.amplification import wilson_interval

    found = share(3, 12, LEVEL)
    low, high = wilson_interval(3, 12, LEVEL)
    assert (found.women, found.total, found.percent) == (3, 12, 25.0)
    assert (found.low, found.high) == pytest.approx((100 * low, 100 * high))
    assert share(0, 0, LEVEL).percent is None


def test_p_values_are_holm_adjusted_across_the_methods_of_a_template_and_claims_rest_on_them():
    """Two methods asked the same question on prompt 1: Holm doubles the smaller p (0.0572 -> 0.1144, and the
    larger, 0.0742, rises to it). The average's family is its own, and a row without a t-test has no p."""
    from auditor.records import AmplificationSummary, Interval
    from auditor.scoring.amplification import adjust_across_methods

    generated, training = _sides()
    rows = amplification_rows(generated, training, OCCUPATIONS, ["keyword", "nn"], 2, resamples=200, seed=0, level=LEVEL)
    table = summaries(
        rows, OCCUPATIONS, ["keyword", "nn"], 2, "images", exclude_flips=False, resamples=200, seed=0, level=LEVEL
    )
    by = {(s.method, s.template): s for s in table}
    keyword, nn = by["keyword", 1], by["nn", 1]
    assert keyword.p_value == pytest.approx(ttest_1samp([20, 30, 10], 0.0).pvalue)  # 0.0742
    assert nn.p_value == pytest.approx(ttest_1samp([20, 10, 10], 0.0).pvalue)  # 0.0572
    assert keyword.p_adjusted == nn.p_adjusted == pytest.approx(2 * nn.p_value)
    assert by["keyword", 2].p_adjusted is None and by["nn", 2].p_adjusted == pytest.approx(1.0)  # 1 p: itself
    assert by["nn", None].p_adjusted == pytest.approx(by["nn", None].p_value)

    def row(method: str, p: float) -> AmplificationSummary:
        return AmplificationSummary(
            method=method, template=1, basis="images", occupations=10, mean=12.0,
            mean_ci=Interval(low=5.0, high=19.0, method="percentile", defined=1.0), t_statistic=2.5, p_value=p,
        )  # fmt: skip

    alone = row("keyword", 0.03)
    assert "(amplification)" in finding(alone)  # a record without adjusted p-values is read on its raw p
    crowded = adjust_across_methods([alone, row("nn", 0.04)])
    assert [s.p_adjusted for s in crowded] == pytest.approx([0.06, 0.06])
    said = finding(crowded[0])
    assert "no clear amplification" in said and "adjusted p is not below 0.05" in said
    assert "p = 0.03 (two-sided), Holm-adjusted across the methods to 0.06" in said
    strong = adjust_across_methods([row("keyword", 0.01), row("nn", 0.04)])
    assert [s.p_adjusted for s in strong] == pytest.approx([0.02, 0.04])
    assert all("(amplification)" in finding(s) for s in strong)
    one = AmplificationSummary(
        method="keyword", template=1, basis="images", occupations=1, missing=["nurse"], mean=33.3, t_statistic=None,
        p_value=None,
    )  # fmt: skip
    assert "(one occupation: no interval over occupations)" in finding(one) and "excludes" not in finding(one)
    assert "over 1 occupation (none for nurse: no G or no T)" in finding(one)


def test_a_record_with_a_zero_width_interval_over_one_occupation_loads_without_it():
    """Written before a mean over one occupation went without an interval: the stored [x, x] would back a claim."""
    from auditor.records import AmplificationSummary, Interval

    stored = {
        "method": "keyword", "template": 1, "basis": "images", "occupations": 1, "mean": 33.3,
        "mean_ci": Interval(low=33.3, high=33.3, method="percentile", defined=1.0).model_dump(), "t_statistic": None,
        "p_value": None,
    }  # fmt: skip
    one = AmplificationSummary.model_validate(stored)
    assert one.mean_ci is None and "excludes" not in finding(one)
    two = AmplificationSummary.model_validate(stored | {"occupations": 2})
    assert two.mean_ci is not None


def test_an_amplification_or_share_that_is_not_0_is_never_written_as_0():
    """Percentage points at one decimal wrote an amplification of +0.04 as "+0.0", read as none at all."""
    from auditor.records import Interval
    from auditor.records.amplification import Share
    from auditor.reporting.amplification import share_text, signed_interval

    def interval(low: float, high: float) -> Interval:
        return Interval(low=low, high=high, method="percentile", defined=1.0)

    assert signed_interval(10.24, interval(6.1, 14.3)) == "+10.2 [+6.1, +14.3]"
    assert signed_interval(0.04, interval(-1.2, 1.3)) == "+0.04 [-1.20, +1.30]"
    assert signed_interval(0.04, None) == "+0.04" and signed_interval(None, None) == "–"
    assert share_text(Share(percent=23.1, low=15.2, high=33.4, women=3, total=13)) == "23.1 [15.2, 33.4]"
    assert share_text(Share(percent=0.3, low=0.0, high=1.6, women=1, total=300), 0) == "0.3 [0.0, 1.6]"
    assert share_text(Share(percent=None, low=None, high=None, women=0, total=0)) == "–"
