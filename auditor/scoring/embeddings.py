"""Embedding scores beside CAS in every prompt audit: similarity to each counterfactual, T2IAT per axis.

Two numbers from image embeddings (CLIP), which see what the VQA answers may miss:

- **embedding similarity** of each counterfactual: the mean cosine similarity over all
  pairs (initial image, counterfactual image). Higher = the counterfactual's images look
  more like the initial prompt's.
- **T2IAT association** of each axis with exactly two counterfactuals (male/female,
  young/old): a single concept (the initial prompt) with two attribute image sets, so
  :func:`auditor.metrics.t2iat.single_concept_association` applies. The initial images
  play X with ``Asc(x) = mean_a cos(x, a) - mean_b cos(x, b)``, A being counterfactual 0
  and B counterfactual 1 in plan order; Y is the pooled counterfactual images, each
  scored the same way with itself left out of its own set, i.e. a balanced A/B mix.
  ``S > 0`` means the initial images lean towards counterfactual 0 more than a balanced
  mix of the two does; d and the permutation p-value say how clearly.

Only images the caller passes count; the prompt audit passes the usable (not
NSFW-flagged) ones. A set without embeddings is skipped with a warning.
"""

from __future__ import annotations

import numpy as np

from auditor.metrics.t2iat import mean_cosine, single_concept_association
from auditor.records import (
    INITIAL_PROMPT_ID,
    AssociationResult,
    AuditPlan,
    Scores,
    ScoringSettings,
    counterfactual_id,
)
from auditor.scoring.t2iat import association_record


def _rows(embeddings: dict[str, np.ndarray], prompt_id: str) -> np.ndarray | None:
    """The embeddings of one prompt set, or None when it has none."""
    array = embeddings.get(prompt_id)
    if array is None or np.asarray(array).ndim != 2 or len(array) == 0:
        return None
    return np.asarray(array)


def embedding_scores(
    plan: AuditPlan, embeddings: dict[str, np.ndarray], settings: ScoringSettings
) -> tuple[dict[str, float], dict[str, AssociationResult]]:
    """``(similarity by counterfactual prompt id, association by axis name)``.

    ``embeddings`` maps prompt ids (``'initial'``, ``'<axis>/<k>'``) to (n, dim) arrays.
    Counterfactuals or axes whose sets lack embeddings are left out (see
    :func:`apply_embedding_scores` for the warnings). Associations need at least two
    images in each counterfactual set (leave-one-out).
    """
    initial = _rows(embeddings, INITIAL_PROMPT_ID)
    similarities: dict[str, float] = {}
    associations: dict[str, AssociationResult] = {}
    if initial is None:
        return similarities, associations
    for axis in plan.axes:
        sets = [_rows(embeddings, counterfactual_id(axis.name, k)) for k in range(len(axis.counterfactuals))]
        for k, rows in enumerate(sets):
            if rows is not None:
                similarities[counterfactual_id(axis.name, k)] = mean_cosine(initial, rows)
        if len(sets) == 2 and all(rows is not None and len(rows) >= 2 for rows in sets):
            _, association = single_concept_association(
                initial, sets[0], sets[1], permutations=settings.permutations, seed=settings.permutation_seed
            )
            associations[axis.name] = association_record(association)
    return similarities, associations


def apply_embedding_scores(
    scores: Scores, plan: AuditPlan, embeddings: dict[str, np.ndarray], settings: ScoringSettings
) -> Scores:
    """A copy of ``scores`` with ``embedding_similarity`` and ``association`` filled in, and warnings for gaps."""
    similarities, associations = embedding_scores(plan, embeddings, settings)
    warnings = list(scores.warnings)
    have_initial = _rows(embeddings, INITIAL_PROMPT_ID) is not None
    if not have_initial:
        warnings.append("no embeddings of the initial images: embedding scores left out")
    axes = []
    for axis_score in scores.axes:
        counterfactuals = []
        for cf in axis_score.counterfactuals:
            similarity = similarities.get(cf.prompt_id)
            if similarity is None and have_initial:
                warnings.append(f"{cf.prompt_id}: no usable image embeddings, so no embedding similarity")
            counterfactuals.append(cf.model_copy(update={"embedding_similarity": similarity}))
        association = associations.get(axis_score.axis)
        if association is None and have_initial and len(axis_score.counterfactuals) == 2:
            warnings.append(
                f"{axis_score.axis}: no T2IAT association (it needs two embedded images per counterfactual)"
            )
        axes.append(axis_score.model_copy(update={"counterfactuals": counterfactuals, "association": association}))
    return scores.model_copy(update={"axes": axes, "warnings": warnings})
