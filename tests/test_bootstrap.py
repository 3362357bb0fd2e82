"""The paired bootstrap over seeds: intervals by hand, the point estimate reproduced, coverage by simulation.

Reference values come from the point-estimate code (``set_concepts`` + ``score_axes``,
``mean_cosine``, ``single_concept_association``) run on the images a resample draws,
from pair-by-pair computations that keep the design's share of same-seed pairs
(:mod:`tests.seed_design`), from hand computations in the comments, and from simulated
data with a known truth.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditor.core.errors import AuditorError
from auditor.metrics import bootstrap, resampled
from auditor.metrics.t2iat import association_test, effect_size, mean_cosine, single_concept_association
from auditor.records import (
    INITIAL_PROMPT_ID,
    GeneratedImage,
    ImageAnswers,
    PromptSet,
    ScoringSettings,
    counterfactual_id,
)
from auditor.scoring.concepts import SynonymIndex, set_concepts
from auditor.scoring.counts import SetEmbeddings, answer_counts, tibet_file_counts, usable_embeddings
from auditor.scoring.tibet import score_axes, score_tibet_result
from auditor.scoring.tibet_files import parse_tibet_result
from auditor.scoring.uncertainty import BootstrapSettings, score_intervals, tibet_samples
from tests import seed_design


@pytest.fixture(scope="module")
def synonyms() -> SynonymIndex:
    return SynonymIndex()


# --------------------------------------------------------------------------- interval functions by hand


def test_percentile_interval_by_hand():
    # 1..10 in any order, NaNs (undefined resamples) left out: linear interpolation between
    # order statistics, position q (n - 1): 0.025 * 9 = 0.225 -> 1.225; 0.975 * 9 = 8.775 -> 9.775
    samples = np.array([7, 3, np.nan, 10, 1, 5, 2, 9, np.nan, 4, 6, 8], dtype=float)[:, None]
    low, high = bootstrap.percentile_bounds(samples, 0.95)
    assert low[0] == pytest.approx(1.225) and high[0] == pytest.approx(9.775)
    assert low[0] == pytest.approx(np.percentile(np.arange(1, 11), 2.5))
    bounds = bootstrap.intervals(np.array([5.0]), samples)
    assert bounds.defined[0] == pytest.approx(10 / 12)
    assert list(bounds.method) == ["percentile"] and bounds.note[0] is None
    # no defined resample: no interval; an undefined estimate: no interval either
    assert np.isnan(bootstrap.percentile_bounds(np.full((4, 1), np.nan))[0][0])
    assert np.isnan(bootstrap.intervals(np.array([np.nan]), samples).low[0])


def test_bca_interval_by_hand():
    # estimate 8, resamples 1..20: 7 below, 8 at or below -> share (7 + 8) / 40 = 0.375,
    #   z0 = Φ⁻¹(0.375) = -0.318639
    # jackknife 1, 2, 3, 6: mean 3, d = 2, 1, 0, -3; Σd³ = -18, Σd² = 14 -> a = -18 / (6 · 14^1.5) = -0.057270
    # 90%: z = ∓1.644854 -> α1 = Φ(z0 + (z0 + z) / (1 - a (z0 + z))) = 0.0056885, α2 = 0.8196300
    # quantiles of 1..20 at α: 1 + 19 α -> 1.108082 and 16.572970
    samples = np.arange(1, 21, dtype=float)[:, None]
    low, high, note = bootstrap.bca_bounds(np.array([8.0]), samples, np.array([[1.0], [2.0], [3.0], [6.0]]), 0.90)
    assert note[0] is None
    assert low[0] == pytest.approx(1.1080816, abs=1e-6)
    assert high[0] == pytest.approx(16.5729704, abs=1e-6)
    # no bias and a symmetric jackknife (a = 0, z0 = 0): BCa is the percentile interval
    symmetric = np.arange(1, 22, dtype=float)[:, None]  # 10 below 11, 11 at or below -> share 1/2
    low, high, _ = bootstrap.bca_bounds(np.array([11.0]), symmetric, np.array([[1.0], [2.0], [3.0]]), 0.9)
    p_low, p_high = bootstrap.percentile_bounds(symmetric, 0.9)
    assert (low[0], high[0]) == pytest.approx((p_low[0], p_high[0]))


def test_bca_p_value_and_one_sided_bound_by_hand():
    # the example above: estimate 8, resamples 1..20, jackknife 1, 2, 3, 6 -> z0 = -0.318639, a = -0.057270.
    # "above 3.5": 3 resamples at or below -> F = (1 + 3) / (1 + 20) = 0.190476, Φ⁻¹(F) = -0.876143,
    # d = Φ⁻¹(F) - z0 = -0.557503, p = Φ(d / (1 + a d) - z0) = Φ(-0.540254 + 0.318639) = 0.412307
    samples, jackknife = np.arange(1, 21, dtype=float)[:, None], np.array([[1.0], [2.0], [3.0], [6.0]])
    p, note = bootstrap.bca_p_value_above(np.array([8.0]), samples, jackknife, value=3.5)
    assert note[0] is None and p[0] == pytest.approx(0.4123069, abs=1e-6)
    # the inversion: BCa's one-sided lower bound at level 1 - p sits at the resamples' F quantile, 1 + 19 F
    low, note = bootstrap.bca_quantile(np.array([8.0]), samples, jackknife, p[0])
    assert note[0] is None and low[0] == pytest.approx(1 + 19 * 4 / 21)
    # the percentile p-value of the same resamples is F itself; BCa moves it, as it moves the interval
    assert bootstrap.p_value_above(samples, 3.5)[0] == pytest.approx(4 / 21)
    # a one-sided bound is the two-sided interval's end at the same tail
    low, _ = bootstrap.bca_quantile(np.array([8.0]), samples, jackknife, 0.05)
    assert low[0] == pytest.approx(bootstrap.bca_bounds(np.array([8.0]), samples, jackknife, 0.90)[0][0])
    # no bias and a symmetric jackknife (z0 = a = 0): the percentile p-value
    symmetric = np.arange(1, 22, dtype=float)[:, None]
    p, _ = bootstrap.bca_p_value_above(np.array([11.0]), symmetric, np.array([[1.0], [2.0], [3.0]]), value=4.5)
    assert p[0] == pytest.approx(bootstrap.p_value_above(symmetric, 4.5)[0])


def test_a_p_value_below_alpha_always_comes_with_a_lower_bound_above_0():
    # 12 of 20 resamples at or below 0, the last two -0.1 and 0.01: the interpolated quantile passes 0 at level
    # (11 + 0.1 / 0.11) / 19 = 0.62679, above the smoothed share 13 / 21 = 0.61905, so that level is F. The estimate
    # lies above 17 resamples (z0 = Φ⁻¹(0.85) = 1.03643) and the jackknife is symmetric (a = 0):
    # p = Φ(Φ⁻¹(0.62679) - 2 z0) = Φ(0.32305 - 2.07287) = 0.040103. From the share alone it would be 0.0382, and
    # a test at alpha 0.04 would claim "above 0" with a lower bound of -0.0009.
    samples = np.r_[np.linspace(-1.2, -0.1, 12), 0.01, np.linspace(0.2, 1.6, 7)][:, None]
    estimate, jackknife = np.array([(samples[16, 0] + samples[17, 0]) / 2]), np.array([[1.0], [2.0], [3.0]])
    assert bootstrap.p_value_above(samples)[0] == pytest.approx((11 + 0.1 / 0.11) / 19)
    p, _ = bootstrap.bca_p_value_above(estimate, samples, jackknife)
    assert p[0] == pytest.approx(0.040103, abs=1e-6)
    for alpha in np.linspace(0.001, 0.3, 300):
        low, _ = bootstrap.bca_quantile(estimate, samples, jackknife, alpha)
        assert (low[0] > 0) == (alpha > p[0])
    # the same for the percentile p-value, on random resamples (the share alone fails past the median)
    rng = np.random.default_rng(0)
    for _ in range(200):
        resamples = rng.normal(rng.normal(), 1.0, size=(int(rng.integers(2, 40)), 1)).round(1)
        p = bootstrap.p_value_above(resamples)[0]
        assert all(bootstrap.quantiles(resamples, q)[0] > 0 for q in np.linspace(0.001, 0.999, 200) if q > p)


def test_bca_p_value_is_undefined_where_bca_is():
    samples = np.linspace(0.0, 1.0, 10_000)[:, None]
    p, note = bootstrap.bca_p_value_above(np.array([2.0]), samples, np.linspace(0.4, 0.5, 9)[:, None], 0.5)
    assert np.isnan(p[0]) and note[0] == "every resample lies on one side of the estimate"
    # One seed moves the statistic far more than the others: a = -0.1664. With the estimate above one resample
    # alone (z0 = Φ⁻¹(2 / 20000) = -3.719) and 9,999 resamples at or below 0.9999 (Φ⁻¹(F) = 3.719), d = 7.44 and
    # 1 + a d < 0: the acceleration keeps BCa's lower bound from ever reaching 0.9999, at any level.
    outlier = np.r_[np.zeros(999), 1.0][:, None]
    p, note = bootstrap.bca_p_value_above(np.array([0.00005]), samples, outlier, 0.9999)
    assert np.isnan(p[0]) and note[0] == "the acceleration is too large for this test"
    # every resample at or below the value: so is every bound, p = 1 whatever the acceleration
    p, note = bootstrap.bca_p_value_above(np.array([0.00005]), samples, outlier, 1.0)
    assert p[0] == 1.0 and note[0] is None
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        bootstrap.bca_quantile(np.array([0.5]), samples, outlier, 1.0)


def test_first_rank_shares_credit_an_axis_only_where_it_alone_is_largest():
    nan = np.nan
    bavs = np.array([
        [0.3, 0.1, 0.2],  # the first alone
        [0.1, 0.4, 0.2],  # the second alone
        [0.0, 0.0, nan],  # a tie at 0 credits neither
        [0.2, 0.2, 0.1],  # a tie for the largest credits neither
        [nan, nan, nan],  # no BAV credits none
        [nan, 0.0, nan],  # the only BAV is the largest
        [0.2, np.nextafter(0.2, 1.0), 0.1],  # equal but for float noise: a tie, as the reports rank them
    ])  # fmt: skip
    assert resampled.first_rank_shares(bavs).tolist() == [1 / 7, 2 / 7, 0.0]
    assert resampled.first_rank_shares(np.empty((0, 2))).tolist() == [0.0, 0.0]


def test_bca_agrees_with_scipy_on_a_skewed_mean():
    data = np.random.default_rng(5).exponential(size=30)
    resamples = 20_000
    samples = bootstrap.resample_weights(30, resamples, 1) @ data / 30
    jackknife = bootstrap.jackknife_weights(30) @ data / 29
    ours = bootstrap.intervals(np.array([data.mean()]), samples[:, None], method="bca", jackknife=jackknife[:, None])
    theirs = stats.bootstrap((data,), np.mean, method="BCa", n_resamples=resamples, rng=2).confidence_interval
    assert ours.method[0] == "bca"
    width = theirs.high - theirs.low
    assert ours.low[0] == pytest.approx(theirs.low, abs=0.03 * width)
    assert ours.high[0] == pytest.approx(theirs.high, abs=0.03 * width)


def test_bca_falls_back_to_percentile_where_it_degenerates():
    samples = np.column_stack([np.full(50, 0.4), np.linspace(0.1, 0.3, 50)])
    estimate = np.array([0.4, 0.5])  # column 0: no spread; column 1: every resample below the estimate
    jackknife = np.column_stack([np.full(5, 0.4), np.linspace(0.45, 0.5, 5)])
    bounds = bootstrap.intervals(estimate, samples, method="bca", jackknife=jackknife)
    assert list(bounds.method) == ["percentile", "percentile"]
    assert list(bounds.note) == ["every resample is equal", "every resample lies on one side of the estimate"]
    p_low, p_high = bootstrap.percentile_bounds(samples)
    assert np.array_equal(bounds.low, p_low) and np.array_equal(bounds.high, p_high)
    with pytest.raises(ValueError, match="jackknife"):
        bootstrap.intervals(estimate, samples, method="bca")


# --------------------------------------------------------------------------- data for the scoring side

AXES = [
    ("gender", ["a photo of a male doctor", "a photo of a female doctor"]),
    ("age", ["a photo of a young doctor", "a photo of an old doctor", "a photo of a middle-aged doctor"]),
]
AXIS_NAMES = [name for name, _ in AXES]
PROMPT_IDS = [INITIAL_PROMPT_ID] + [counterfactual_id(name, k) for name, cfs in AXES for k in range(len(cfs))]
# "male" and "men" are linked only through "man" (likewise female/woman/women); doctor~physician;
# the rest are unlinked. Rare words are there so the frequency floor bites.
POOL = ["male", "man", "men", "female", "woman", "women", "doctor", "physician", "coat", "lab", "young", "old"]
RARE = ["violin", "glacier", "pepper", "anchor", "tulip", "kettle"]
SEEDS = 12
#: Seed indices without a usable image: flagged NSFW, or never answered.
FLAGGED = {INITIAL_PROMPT_ID: {3}, "gender/1": {5, 7}}
UNANSWERED = {"age/2": 11}


def _audit_answers(seed: int = 0) -> dict[str, list[ImageAnswers]]:
    rng = np.random.default_rng(seed)
    found = {}
    for prompt_id in PROMPT_IDS:
        weights = rng.dirichlet(np.ones(len(POOL)))  # each set leans its own way
        images = []
        for i in range(SEEDS):
            if UNANSWERED.get(prompt_id) == i:
                continue
            answers = {axis: " ".join(rng.choice(POOL, size=2, p=weights)) for axis in AXIS_NAMES}
            caption = "a photo of a " + " ".join(rng.choice(POOL, size=2, p=weights))
            if rng.random() < 0.3:
                caption += " with a " + rng.choice(RARE)
            images.append(ImageAnswers(image_index=i, answers=answers, caption=caption))
        found[prompt_id] = images
    return found


def _point_scores(answers, settings, synonyms, drawn=None, flagged=FLAGGED):
    """``score_axes`` on the images a resample draws (``drawn``: seed indices; None: the data as is).

    Each set keeps the drawn seeds it has a usable image of, repeats included: the
    straightforward reading of "resample seeds, drop what a set lacks".
    """
    concepts = {}
    for prompt_id, images in answers.items():
        usable = {image.image_index: image for image in images if image.image_index not in flagged.get(prompt_id, ())}
        order = sorted(usable) if drawn is None else [i for i in drawn if i in usable]
        picked = [usable[i].model_copy(update={"image_index": k}) for k, i in enumerate(order)]
        concepts[prompt_id] = set_concepts(
            prompt_id,
            picked,
            AXIS_NAMES,
            include_captions=settings.include_captions,
            min_frequency=settings.min_frequency,
        )
    return score_axes(AXES, concepts, settings, synonyms=synonyms)


def _flat(scores):
    cas = [cf.cas for axis in scores.axes for cf in axis.counterfactuals]
    per_axis = [[getattr(axis, name) for axis in scores.axes] for name in ("bav", "bav_mad", "relative_bav", "lean")]
    return np.array([np.nan if v is None else v for v in cas + sum(per_axis, [])], dtype=float)


def _sampled(samples, row):
    return np.concatenate(
        [samples.cas[row], samples.bav[row], samples.bav_mad[row], samples.relative_bav[row], samples.lean[row]]
    )


def _counts(answers, settings, flagged=FLAGGED):
    return answer_counts(answers, AXIS_NAMES, include_captions=settings.include_captions, flagged=flagged, seeds=SEEDS)


# --------------------------------------------------------------------------- the point estimate, reproduced


@pytest.mark.parametrize("normalization", ["distribution", "frequency"])
@pytest.mark.parametrize("min_frequency", [0.01, 0.15])
def test_identity_resample_reproduces_the_point_estimate(synonyms, normalization, min_frequency):
    # 0.15 with 10-12 usable images: a word must be seen twice, so the floor drops words here
    settings = ScoringSettings(cas_normalization=normalization, min_frequency=min_frequency)
    answers = _audit_answers()
    samples = tibet_samples(AXES, _counts(answers, settings), settings, np.ones((1, SEEDS)), synonyms=synonyms)
    expected = _flat(_point_scores(answers, settings, synonyms))
    assert np.array_equal(np.isnan(_sampled(samples, 0)), np.isnan(expected))
    np.testing.assert_allclose(_sampled(samples, 0), expected, rtol=0, atol=1e-12)


def test_identity_resample_reproduces_a_tibet_file_score(synonyms):
    rng = np.random.default_rng(2)

    def image_set(n):
        return [[str(rng.choice(POOL)), str(rng.choice(POOL + RARE))] for _ in range(n)]

    result = parse_tibet_result({
        "result": {"gender": ["a male nurse", "a female nurse"]},
        "questions": ["What is the gender of the person?", "What is in the image?"],
        "concepts_initial": image_set(10),
        "concepts_cf": {"gender": [image_set(10), image_set(8)]},  # a shorter set: seeds 8, 9 missing there
    })  # fmt: skip
    settings = ScoringSettings()
    counts = tibet_file_counts(result)
    assert counts.seeds == 10 and counts.sets["gender/1"].available.tolist() == [True] * 8 + [False] * 2
    samples = tibet_samples([("gender", ["a male nurse", "a female nurse"])], counts, settings, np.ones((1, 10)))
    scores = score_tibet_result(result, settings)
    assert samples.cas[0] == pytest.approx([cf.cas for cf in scores.axes[0].counterfactuals], abs=1e-12)
    assert samples.lean[0, 0] == pytest.approx(scores.axes[0].lean, abs=1e-12)


@pytest.mark.parametrize("min_frequency", [0.01, 0.15])
def test_every_resample_is_the_point_estimate_of_the_images_it_draws(synonyms, min_frequency):
    # The pairing with missing images: one draw of seed indices for every set; each set drops the
    # seeds it has no usable image of (flagged or unanswered) and divides by the images left.
    # Rows are checked against score_axes on exactly those images, so the frequency floor per
    # resample and the synonym groups that split without their bridging word are checked too.
    settings = ScoringSettings(min_frequency=min_frequency)
    answers = _audit_answers(1)
    indices = bootstrap.resample_indices(SEEDS, 40, seed=3)
    weights = bootstrap.multiplicities(indices, SEEDS)
    samples = tibet_samples(AXES, _counts(answers, settings), settings, weights, synonyms=synonyms)
    for row, drawn in enumerate(indices):
        expected = _flat(_point_scores(answers, settings, synonyms, drawn=drawn))
        got = _sampled(samples, row)
        assert np.array_equal(np.isnan(got), np.isnan(expected)), f"resample {row}"
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=f"resample {row}")
    # a row that draws only the flagged seed 3 leaves the initial set without images: every CAS undefined
    only_seed_3 = bootstrap.multiplicities(np.full((1, SEEDS), 3), SEEDS)
    alone = tibet_samples(AXES, _counts(answers, settings), settings, only_seed_3)
    assert np.isnan(alone.cas).all() and np.isnan(alone.bav).all()


def test_embedding_statistics_are_the_point_estimates_of_the_drawn_images():
    rng = np.random.default_rng(4)
    usable = {
        prompt_id: [i for i in range(SEEDS) if i not in FLAGGED.get(prompt_id, ())] for prompt_id in PROMPT_IDS
    }
    vectors = {prompt_id: rng.normal(size=(len(indices), 16)) + 0.5 for prompt_id, indices in usable.items()}
    embeddings = {p: SetEmbeddings(np.array(usable[p]), vectors[p]) for p in PROMPT_IDS}
    settings = ScoringSettings()
    counts = _counts(_audit_answers(), settings)
    indices = np.vstack([np.arange(SEEDS), bootstrap.resample_indices(SEEDS, 10, seed=8)])
    samples = tibet_samples(AXES, counts, settings, bootstrap.multiplicities(indices, SEEDS), embeddings=embeddings)

    def drawn(prompt_id, row):
        position = {seed: k for k, seed in enumerate(usable[prompt_id])}
        return vectors[prompt_id][[position[i] for i in indices[row] if i in position]]

    axis = (INITIAL_PROMPT_ID, "gender/0", "gender/1")
    images = [list(zip(usable[p], vectors[p], strict=True)) for p in axis]
    _, point = single_concept_association(*(vectors[p] for p in axis), permutations=1)
    # every seed once: the point estimate itself
    assert (samples.association[0, 0], samples.effect_size[0, 0]) == pytest.approx(
        (point.association, point.effect_size), abs=1e-12
    )
    for row in range(len(indices)):
        initial = drawn(INITIAL_PROMPT_ID, row)
        for j, prompt_id in enumerate(samples.counterfactual_ids):
            expected = _design_mean_cosine(vectors, usable, INITIAL_PROMPT_ID, prompt_id, indices[row])
            assert samples.similarity[row, j] == pytest.approx(expected, abs=1e-12)
            if row == 0:  # every seed once: the mean over all pairs
                assert expected == pytest.approx(mean_cosine(initial, drawn(prompt_id, row)), abs=1e-12)
        expected = seed_design.single_concept(*images, indices[row])
        assert samples.association[row, 0] == pytest.approx(expected[0], abs=1e-12)
        assert samples.effect_size[row, 0] == pytest.approx(expected[1], abs=1e-9)
        assert np.isnan(samples.association[row, 1])  # three counterfactuals: no T2IAT test, as in the point estimate

    # the embed stage's arrays hold the usable images only: their seed indices skip the flagged ones
    prompt_sets = [
        PromptSet(
            prompt_id=prompt_id,
            prompt=prompt_id,
            images=[
                GeneratedImage(index=i, file=f"{i}.png", sha256="0", flagged_nsfw=i in FLAGGED.get(prompt_id, ()))
                for i in range(SEEDS)
            ],
        )
        for prompt_id in PROMPT_IDS
    ]
    mapped = usable_embeddings(prompt_sets, vectors)
    assert mapped["gender/1"].image_indices.tolist() == usable["gender/1"]
    with pytest.raises(AuditorError, match="10 embeddings for 12 usable images"):
        usable_embeddings(prompt_sets, {"age/0": vectors["gender/1"]})

    # the six-group test of `auditor t2iat`, paired over seeds the same way
    groups = [rng.normal(size=(6, 8)) + shift for shift in (0.3, -0.2, 0.5, 0.1, -0.4, 0.2)]
    rows = np.vstack([np.arange(6), bootstrap.resample_indices(6, 5, seed=1)])
    weights = bootstrap.multiplicities(rows, 6)
    s, d = resampled.association_test_samples(groups, [weights] * 6, [np.arange(6)] * 6)
    for row, picked in enumerate(rows):
        expected = seed_design.six_groups([list(enumerate(group)) for group in groups], picked)
        assert (s[row], d[row]) == pytest.approx(expected, abs=1e-12)
    point = association_test(*groups, permutations=1)
    assert (s[0], d[0]) == pytest.approx((point.association, point.effect_size), abs=1e-12)
    assert effect_size(np.array([0.2, 0.2]), np.array([0.1, 0.1])) is None  # the rule NaN mirrors


def _design_mean_cosine(vectors, usable, first: str, second: str, drawn_seeds) -> float:
    """The similarity of two sets in a resample, pair by pair: the same-seed pairs' mean over the draws (each
    drawn position pairs its seed's two images once) and the mean over drawn pairs of different seeds, in
    the shares the whole data give them."""

    def unit(vector):
        return vector / np.linalg.norm(vector)

    u = {seed: unit(vector) for seed, vector in zip(usable[first], vectors[first], strict=True)}
    v = {seed: unit(vector) for seed, vector in zip(usable[second], vectors[second], strict=True)}
    same = [u[seed] @ v[seed] for seed in drawn_seeds if seed in u and seed in v]
    other = [u[s] @ v[t] for s in drawn_seeds if s in u for t in drawn_seeds if t in v and s != t]
    share = len(u.keys() & v.keys()) / (len(u) * len(v))
    return share * np.mean(same) + (1 - share) * np.mean(other)


def test_similarity_intervals_cover_the_similarity_of_the_design_in_simulation():
    """Two prompts' images from the same seed share its noise, so they are more alike than two from different
    seeds. The mean over all pairs gives those 1/n of the weight; a resample that paired every draw with
    every draw gave them about 2/n, and its intervals lay above the truth (77% coverage at 8 seeds).
    The truth for 8 seeds: the mean similarity over many data sets of 8 seeds each."""
    rng = np.random.default_rng(11)
    seeds, dim = 8, 16

    def draw():
        noise = rng.normal(size=(seeds, dim))
        return noise + 0.6 * rng.normal(size=(seeds, dim)) + 1.0, noise + 0.6 * rng.normal(size=(seeds, dim)) + 1.2

    truth = np.mean([mean_cosine(*draw()) for _ in range(4000)])
    order = np.arange(seeds)
    covered = 0
    for trial in range(300):
        u, v = draw()
        weights = bootstrap.multiplicities(bootstrap.resample_indices(seeds, 1000, seed=trial), seeds)
        samples = resampled.mean_cosine_samples(u, weights, order, v, weights, order)
        low, high = bootstrap.percentile_bounds(samples[:, None])
        covered += bool(low[0] <= truth <= high[0])
    assert 0.88 <= covered / 300 <= 0.99


def _association_samples(kind: str, sets: list[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """S in every row: of an audit axis (initial, A, B) or of the six-group test (X, Y, XA, XB, YA, YB)."""
    seeds = np.arange(weights.shape[1])
    if kind == "audit axis":
        x, a, b = sets
        return resampled.single_concept_association_samples(x, weights, seeds, a, weights, seeds, b, weights, seeds)[0]
    return resampled.association_test_samples(sets, [weights] * 6, [seeds] * 6)[0]


@pytest.mark.parametrize(
    ("kind", "shares"),
    [("audit axis", [(0, 1)]), ("t2iat run", [(0, 2), (1, 5)])],  # initial ~ A; X ~ X^A and Y ~ Y^B
)
def test_association_intervals_cover_the_association_of_the_design_in_simulation(kind, shares):
    """Asc is a mean cosine with sets that hold an image of the same seed. When a concept's images share their
    seed's look with one attribute's more than with the other's (the initial prompt's default is A, "a
    pharmacist" and "a male pharmacist" from one seed nearly alike), pairing every draw with every draw
    gave those pairs about 2/n of the weight instead of 1/n, and S's intervals lay above the truth: here 9%
    of them wholly above it for an audit axis, 21% for the six-group test (now 1.5% each). Each tail should
    miss about 2.5%. The truth for 8 seeds: the mean S over many data sets of 8 seeds each."""
    rng = np.random.default_rng(12)
    seeds, dim, count = 8, 16, 3 if kind == "audit axis" else 6
    means = 1.0 + 0.4 * np.eye(count, dim)

    def draw() -> list[np.ndarray]:
        look = rng.normal(size=(seeds, dim))  # every set's image of a seed shares its noise
        sets = [mean + 0.6 * look + 0.6 * rng.normal(size=(seeds, dim)) for mean in means]
        for pair in shares:  # and these sets a further part
            shared = rng.normal(size=(seeds, dim))
            for k in pair:
                sets[k] += shared
        return sets

    ones = np.ones((1, seeds))
    truth = np.mean([_association_samples(kind, draw(), ones)[0] for _ in range(4000)])
    above = below = 0
    for trial in range(200):
        weights = np.vstack([ones, bootstrap.resample_weights(seeds, 1000, seed=trial)])
        low, high = bootstrap.percentile_bounds(_association_samples(kind, draw(), weights)[1:, None])
        above += bool(low[0] > truth)
        below += bool(high[0] < truth)
    assert above / 200 <= 0.05 and below / 200 <= 0.05, (above, below)


# --------------------------------------------------------------------------- the issue's four tests


def _coverage_answers(rng, n, distributions, share):
    """One simulated audit: image i of every set draws its answer from a categorical
    distribution through the same seed with probability ``share`` (paired), else on its own."""
    words = np.array(["violin", "glacier", "pepper", "anchor"])
    seed_draw = rng.random(n)
    found = {}
    for prompt_id, p in distributions.items():
        u = np.where(rng.random(n) < share, seed_draw, rng.random(n))
        picks = words[np.minimum(np.searchsorted(np.cumsum(p), u), len(p) - 1)]
        found[prompt_id] = [ImageAnswers(image_index=i, answers={"gender": word}) for i, word in enumerate(picks)]
    return found


def test_intervals_cover_the_true_cas_in_simulation(synonyms):
    """≥ 200 simulated audits of 48 images: the 95% intervals cover the true CAS and lean in 88-99%.

    The true values are the large-sample limit: per-image frequencies are the category
    probabilities, so CAS = Σ min / Σ max of the normalised probabilities. The
    distributions differ clearly on every concept: where two sets have a concept at
    nearly equal frequency, min() of two noisy frequencies makes CAS at 48 images biased
    below its limit by more than its spread, and no bootstrap interval can cover the
    limit (the lean, a difference, still does: the two biases cancel).
    """
    distributions = {
        INITIAL_PROMPT_ID: np.array([0.6, 0.25, 0.1, 0.05]),
        "gender/0": np.array([0.1, 0.2, 0.3, 0.4]),
        "gender/1": np.array([0.05, 0.1, 0.15, 0.7]),
    }

    def true_cas(q):
        p = distributions[INITIAL_PROMPT_ID]
        return np.minimum(p, q).sum() / np.maximum(p, q).sum()

    truth = np.array([true_cas(distributions["gender/0"]), true_cas(distributions["gender/1"])])
    truth = np.append(truth, truth[0] - truth[1])  # 0.290, 0.176 and the lean 0.114
    axes = [("gender", ["a photo of a male nurse", "a photo of a female nurse"])]
    rng = np.random.default_rng(11)
    datasets = 300
    covered = np.zeros(3)
    for d in range(datasets):
        answers = _coverage_answers(rng, 48, distributions, share=0.5)
        counts = answer_counts(answers, ["gender"])
        boot = BootstrapSettings(resamples=1000, seed=d)
        found = score_intervals(axes, counts, ScoringSettings(), boot, synonyms=synonyms)
        axis = found.axes[0]
        intervals = [axis.counterfactuals[0].cas, axis.counterfactuals[1].cas, axis.lean]
        covered += [i.low <= t <= i.high for i, t in zip(intervals, truth)]
    coverage = covered / datasets
    assert ((coverage >= 0.88) & (coverage <= 0.99)).all(), coverage


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_identical_sets_give_cas_1_with_a_zero_width_interval(synonyms, method):
    # image i answers differently from image i+1, but the same in every set: every paired resample
    # draws the same images for all sets, so CAS is exactly 1 in every one (unpaired it would not be)
    words = ["doctor coat", "man lab", "woman", "old physician", "young men", "violin"]
    answers = {
        prompt_id: [ImageAnswers(image_index=i, answers={"gender": words[i % 6]}) for i in range(18)]
        for prompt_id in PROMPT_IDS
    }
    counts = answer_counts(answers, ["gender"])
    boot = BootstrapSettings(resamples=300, method=method)
    found = score_intervals(AXES, counts, ScoringSettings(), boot, synonyms=synonyms)
    for axis in found.axes:
        for cf in axis.counterfactuals:
            assert (cf.cas.estimate, cf.cas.low, cf.cas.high) == (1.0, 1.0, 1.0)
            assert cf.cas.method == "percentile"
            assert cf.cas.note == ("every resample is equal" if method == "bca" else None)
        assert (axis.bav.low, axis.bav.high) == (0.0, 0.0)
    assert (found.axes[0].lean.low, found.axes[0].lean.high) == (0.0, 0.0)


def test_a_run_of_one_axis_ranks_no_axis_first(synonyms):
    """One axis leans most of one in every resample: a share of 100% would claim what nothing tested."""
    answers = _audit_answers()
    settings, boot = ScoringSettings(), BootstrapSettings(resamples=100)
    gender_only = {pid: images for pid, images in answers.items() if not pid.startswith("age")}
    counts = answer_counts(gender_only, ["gender"], seeds=SEEDS)
    (gender,) = score_intervals(AXES[:1], counts, settings, boot, synonyms=synonyms).axes
    assert gender.ranks_first is None and gender.bav.estimate is not None
    both = score_intervals(AXES, _counts(answers, settings), settings, boot, synonyms=synonyms)
    assert all(axis.ranks_first is not None for axis in both.axes)


def test_sets_without_concepts_follow_the_cas_rules(synonyms):
    answers = _audit_answers()
    empty = [ImageAnswers(image_index=i, answers={"gender": "yes", "age": "the"}) for i in range(SEEDS)]
    settings = ScoringSettings()
    boot = BootstrapSettings(resamples=200)
    found = score_intervals(AXES, _counts({**answers, "age/1": empty}, settings), settings, boot, synonyms=synonyms)
    age = found.axes[1]
    no_cas = age.counterfactuals[1].cas
    assert (no_cas.estimate, no_cas.low, no_cas.high, no_cas.defined) == (None, None, None, 0.0)
    assert age.bav.estimate is not None and age.bav.low <= age.bav.estimate <= age.bav.high  # from the other two
    assert {age.spread.first, age.spread.second} == {"age/0", "age/2"}

    # the initial set without concepts: every CAS, BAV and difference undefined
    found = score_intervals(AXES, _counts({**answers, INITIAL_PROMPT_ID: empty}, settings), settings, boot)
    for axis in found.axes:
        assert all(cf.cas.estimate is None and cf.cas.low is None for cf in axis.counterfactuals)
        assert axis.bav.estimate is None and axis.spread is None and axis.ranks_first == 0.0
    assert found.axes[0].lean.estimate is None


def test_same_ci_seed_same_intervals_and_the_estimates_never_move(synonyms):
    settings = ScoringSettings()
    counts = _counts(_audit_answers(), settings)
    first = score_intervals(AXES, counts, settings, BootstrapSettings(resamples=300, seed=5), synonyms=synonyms)
    again = score_intervals(AXES, counts, settings, BootstrapSettings(resamples=300, seed=5), synonyms=synonyms)
    other = score_intervals(AXES, counts, settings, BootstrapSettings(resamples=500, seed=6, method="bca"))
    assert first == again
    assert first.axes[0].counterfactuals[0].cas.low != other.axes[0].counterfactuals[0].cas.low

    def estimates(found):
        return [
            value
            for axis in found.axes
            for value in [cf.cas.estimate for cf in axis.counterfactuals]
            + [axis.bav.estimate, axis.bav_mad.estimate, axis.relative_bav.estimate, axis.lean and axis.lean.estimate]
        ]

    assert estimates(first) == estimates(other)  # bit for bit, whatever B, seed or method
    point = _point_scores(_audit_answers(), settings, synonyms)
    expected = [
        value
        for axis in point.axes
        for value in [cf.cas for cf in axis.counterfactuals] + [axis.bav, axis.bav_mad, axis.relative_bav, axis.lean]
    ]
    assert estimates(first) == pytest.approx(expected, abs=1e-12)


def test_four_times_the_seeds_halves_the_interval_width(synonyms):
    # each image's answers repeated for 4 seeds: the same empirical distribution over 4x the
    # images, so the standard error, and the interval, shrink by sqrt(4) = 2
    rng = np.random.default_rng(21)
    distributions = {
        INITIAL_PROMPT_ID: np.array([0.5, 0.3, 0.15, 0.05]),
        "gender/0": np.array([0.1, 0.2, 0.3, 0.4]),
        "gender/1": np.array([0.3, 0.05, 0.05, 0.6]),
    }
    answers = _coverage_answers(rng, 48, distributions, share=0.5)
    quadrupled = {
        prompt_id: [
            image.model_copy(update={"image_index": image.image_index + 48 * k}) for k in range(4) for image in images
        ]
        for prompt_id, images in answers.items()
    }
    axes = [("gender", ["a photo of a male nurse", "a photo of a female nurse"])]
    boot = BootstrapSettings(resamples=4000, seed=2)

    def widths(found):
        axis = found.axes[0]
        return np.array([i.high - i.low for i in (axis.counterfactuals[0].cas, axis.counterfactuals[1].cas, axis.lean)])

    once = score_intervals(axes, answer_counts(answers, ["gender"]), ScoringSettings(), boot, synonyms=synonyms)
    four = score_intervals(axes, answer_counts(quadrupled, ["gender"]), ScoringSettings(), boot, synonyms=synonyms)
    assert [cf.cas.estimate for cf in four.axes[0].counterfactuals] == pytest.approx(
        [cf.cas.estimate for cf in once.axes[0].counterfactuals]
    )
    ratio = widths(four) / widths(once)
    assert ((ratio > 0.42) & (ratio < 0.58)).all(), ratio


def test_bad_settings_and_inputs_are_one_line_errors():
    with pytest.raises(AuditorError, match="at least one resample"):
        BootstrapSettings(resamples=0)
    with pytest.raises(AuditorError, match="strictly between 0 and 1"):
        BootstrapSettings(level=1.0)
    with pytest.raises(AuditorError, match="interval method"):
        BootstrapSettings(method="basic")  # type: ignore[arg-type]
    answers = _audit_answers()
    twice = {**answers, "age/0": answers["age/0"] + answers["age/0"][:1]}
    with pytest.raises(AuditorError, match="two answers for image 0"):
        answer_counts(twice, AXIS_NAMES)
    counts = answer_counts({k: v for k, v in answers.items() if k != "age/2"}, AXIS_NAMES)
    with pytest.raises(AuditorError, match="no answers for prompt set 'age/2'"):
        score_intervals(AXES, counts, ScoringSettings(), BootstrapSettings(resamples=10))


def test_equal_cas_values_have_a_bav_of_0_even_where_their_variance_is_float_noise():
    """Three CAS values of 0.1 have an np.var of ~1e-34 (their mean is not exact in binary): as a BAV that made the
    axis's relative BAV 1 beside an axis of exactly 0, and ranked it first."""
    from auditor.metrics.tibet import bav, relative_bav

    assert np.var([0.1, 0.1, 0.1]) > 0
    assert bav([0.1, 0.1, 0.1]) == 0.0 and bav([0.7, 0.7]) == 0.0 and bav([0.1, 0.1 + 1e-7]) > 0
    assert relative_bav([bav([0.1, 0.1, 0.1]), bav([0.7, 0.7])]) == [0.0, 0.0]
    samples = resampled.bav_samples(np.array([[0.1, 0.1, 0.1], [0.1, 0.3, np.nan], [0.2, np.nan, np.nan]]))
    assert samples[0] == 0.0 and samples[1] == pytest.approx(0.01) and np.isnan(samples[2])
