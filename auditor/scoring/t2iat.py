"""T2IAT scoring: embeddings of a run's prompt sets -> association records.

The arithmetic is :mod:`auditor.metrics.t2iat`; this module picks the groups' rows out of
a run's embeddings, turns the metric's outcome into the record's
:class:`~auditor.records.AssociationResult`, scores the occupation study (paper §5.3-5.4:
image quartiles, text vs image), and reads the ``.npz`` files ``auditor t2iat score`` takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from auditor.core.choices import EffectSpread
from auditor.core.errors import AuditorError
from auditor.core.store import slugify
from auditor.metrics import bootstrap
from auditor.metrics.multiple_testing import holm
from auditor.metrics.resampled import association_test_samples
from auditor.metrics.t2iat import (
    Association,
    association_result,
    association_scores,
    quartiles,
    single_concept_association,
)
from auditor.records import T2IAT_GROUPS, AssociationResult, Interval, OccupationAssociation
from auditor.scoring.counts import SetEmbeddings
from auditor.scoring.uncertainty import BootstrapSettings, check_resamplable, interval_at

#: The arrays ``t2iat score`` reads from an .npz file (rows = embeddings), in the order the test takes them.
NPZ_ARRAYS = T2IAT_GROUPS


def association_record(association: Association) -> AssociationResult:
    """The record of a metric outcome (same fields)."""
    return AssociationResult(**dataclasses.asdict(association))


def stack_sets(vectors: dict[str, np.ndarray], prompt_ids: list[str]) -> np.ndarray | None:
    """Rows of several prompt sets, in order; None when none has a usable image."""
    rows = [vectors[pid] for pid in prompt_ids if pid in vectors and len(vectors[pid])]
    return np.concatenate(rows) if rows else None


def score_test(
    vectors: Mapping[str, np.ndarray],
    groups: Mapping[str, list[str]],
    permutations: int,
    seed: int,
    spread: EffectSpread = "pooled",
) -> tuple[dict[str, list[float]], AssociationResult]:
    """Per-image Asc of X and Y and the test's S, d (its sd as ``spread`` says) and p from a run's embeddings.

    ``groups`` maps X, Y, XA, XB, YA, YB to the prompt set ids of each group.
    """
    rows = {}
    for group, prompt_ids in groups.items():
        stacked = stack_sets(vectors, prompt_ids)
        if stacked is None:
            raise AuditorError(f"group {group} has no usable image (all flagged by the safety checker?)")
        rows[group] = stacked
    asc_x = association_scores(rows["X"], rows["XA"], rows["XB"])
    asc_y = association_scores(rows["Y"], rows["YA"], rows["YB"])
    result = association_result(asc_x, asc_y, permutations=permutations, seed=seed, spread=spread)
    return {"X": asc_x.tolist(), "Y": asc_y.tolist()}, association_record(result)


def association_intervals(
    sets: Mapping[str, SetEmbeddings],
    groups: Mapping[str, list[str]],
    seeds: int,
    settings: BootstrapSettings,
    spread: EffectSpread = "pooled",
) -> tuple[Interval, Interval]:
    """Percentile intervals of the six-group test's S and d from a paired bootstrap over seeds.

    Image *i* of every prompt set shares seed *i*, so one draw of seed indices weights the rows
    of all six groups, and every Asc keeps the design's share of pairs of one seed
    (:func:`~auditor.metrics.resampled.association_test_samples`); the identity row gives back the
    test's own S and d. ``sets`` are the usable images of each prompt set
    with their seed indices (:func:`~auditor.scoring.counts.usable_embeddings`).
    """
    from auditor.scoring.intervals import record_interval  # here: scoring.intervals imports this module

    check_resamplable(seeds)
    weights = np.vstack([np.ones((1, seeds)), bootstrap.resample_weights(seeds, settings.resamples, settings.seed)])
    vectors, group_weights, group_seeds = [], [], []
    for group in T2IAT_GROUPS:
        chosen = [sets[pid] for pid in groups[group] if pid in sets and len(sets[pid].vectors)]
        if not chosen:
            raise AuditorError(f"group {group} has no usable image (all flagged by the safety checker?)")
        vectors.append(np.concatenate([found.vectors for found in chosen]))
        group_seeds.append(np.concatenate([found.image_indices for found in chosen]))
        group_weights.append(weights[:, group_seeds[-1]])
    association, effect = association_test_samples(vectors, group_weights, group_seeds, spread)
    estimates = np.array([association[0], effect[0]])
    found = bootstrap.intervals(estimates, np.column_stack([association[1:], effect[1:]]), level=settings.level)
    return record_interval(interval_at(found, estimates, 0)), record_interval(interval_at(found, estimates, 1))


def occupation_ids(occupation: str) -> dict[str, str]:
    """Prompt set ids of an occupation's neutral, male and female prompts (``'<slug>/neutral'``, ...)."""
    slug = slugify(occupation, max_length=80)
    return {"neutral": f"{slug}/neutral", "male": f"{slug}/male", "female": f"{slug}/female"}


def score_occupation(
    occupation: str,
    vectors: dict[str, np.ndarray],
    texts: np.ndarray,
    permutations: int,
    seed: int,
    spread: EffectSpread = "pooled",
) -> OccupationAssociation:
    """Fig. 3 and Fig. 4 numbers of one occupation from its image and text embeddings.

    ``texts`` holds the unit text embeddings of the neutral, male and female prompts.
    """
    ids = occupation_ids(occupation)
    neutral, male, female = (stack_sets(vectors, [ids[k]]) for k in ("neutral", "male", "female"))
    text_association = float(association_scores(texts[:1], texts[1:2], texts[2:3])[0])
    result = OccupationAssociation(
        occupation=occupation,
        prompt_ids=ids,
        image_scores=[],
        image_association=None,
        text_association=text_association,
        amplification=None,
    )
    if neutral is None or male is None or female is None:
        result.warnings.append("a prompt set has no usable image: no image association")
        return result
    if len(male) < 2 or len(female) < 2:
        scores = association_scores(neutral, male, female)
        result.warnings.append("fewer than two male or female images: no permutation test")
        test = None
    else:
        scores, association = single_concept_association(
            neutral, male, female, permutations=permutations, seed=seed, spread=spread
        )
        test = association_record(association)
    mean = float(scores.mean())
    result.image_scores = scores.tolist()
    result.image_association = mean
    result.quartiles = list(quartiles(scores))
    result.amplification = mean - text_association
    result.test = test
    return result


def score_occupations(
    occupations: list[str],
    vectors: dict[str, np.ndarray],
    texts: Mapping[str, np.ndarray],
    permutations: int,
    seed: int,
    spread: EffectSpread = "pooled",
) -> list[OccupationAssociation]:
    """:func:`score_occupation` of each occupation (``texts`` by occupation), with each permutation p Holm-adjusted
    over the occupations that were tested: the study asks one question per occupation, so a small p among many is
    judged as one of many."""
    results = [score_occupation(o, vectors, texts[o], permutations, seed, spread) for o in occupations]
    tested = [i for i, result in enumerate(results) if result.test is not None]
    for i, adjusted in zip(tested, holm([results[i].test.p_value for i in tested]), strict=True):
        results[i] = results[i].model_copy(update={"test": results[i].test.model_copy(update={"p_adjusted": adjusted})})
    return results


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """The six embedding groups of an .npz file; one-line errors for unreadable files and missing arrays."""
    import zipfile

    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise AuditorError(
            f"{path} is not an .npz archive (save one with numpy.savez(path, X=..., Y=..., XA=..., ...))"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [name for name in NPZ_ARRAYS if name not in data.files]
            if missing:
                raise AuditorError(
                    f"{path} lacks array(s) {', '.join(missing)}: it needs {', '.join(NPZ_ARRAYS)} (rows = embeddings)"
                )
            return {name: data[name] for name in NPZ_ARRAYS}
    except FileNotFoundError:
        raise AuditorError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise AuditorError(f"{path} is a folder; give an .npz file") from None
    except ValueError as exc:  # object arrays: numpy refuses to unpickle them
        first = str(exc).strip().splitlines()[0].split(". ")[0]
        raise AuditorError(f"{path} holds an array numpy cannot load without pickle ({first}); store numbers") from None
    except OSError as exc:
        raise AuditorError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise AuditorError(f"cannot read {path}: {exc}") from None
