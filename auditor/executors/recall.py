"""Loaded models remembered, so a stage whose results are all cached loads nothing.

Loading a stage's model costs seconds on a CPU and tens of seconds for Stable Diffusion or
BLIP-2 on a GPU (imports, weights, the move to the device). A stage that finds every result
it wants in the content cache (a rerun, a resume, an exploration's confirmation of images
it made already) needs only what the loaded model says about itself: its identity and its
settings with the model's defaults filled in, which make the cache keys and the record.

After every load in this process (and ``--compile``, whose speed-up the settings record) a
study remembers those in the cache database (stage ``model-recall``), keyed on everything
they follow from: the model's kind and spec, the identity of its weights found without
loading them (the registry's ``identify``: the digests of the files, which the cache
remembers too, their hub revision, the library's version and auditor's own source), the
device it would load on, whether partial weights are allowed, and every setting asked for.
Files that change while the model loads are not remembered. A stage with the same key
records the remembered description, so the record is the one a load would have given, and
loads the model only when a result is missing. Models that cannot be identified beforehand
(an API, a hub id while the hub answers, since a load may fetch a newer snapshot) are always
loaded; so are models on Ray workers (they load on the worker, whose device the driver does
not pick) and an embedder the run may skip when it cannot load (the skip is decided by
loading it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint
from auditor.records import ModelRef

if TYPE_CHECKING:  # pragma: no cover
    from auditor.executors.base import ModelRecipe
    from auditor.studies.run import StudyRun

STAGE = "model-recall"
#: Part of every key: change it when what is remembered changes.
RECALL_FORMAT = 1


@dataclass(frozen=True)
class RecalledModel:
    """What an earlier load of the same weights with the same settings said about the model: enough to look its
    results up in the cache and to record it, nothing to compute with."""

    ref: ModelRef
    #: The settings it ran with (the recipe's settings type, its defaults filled in); None for a model without.
    settings: Any
    #: Whether its results depend on a seed (text-to-image models; None for the others).
    seeded: bool | None
    fingerprint: str

    def cache_fingerprint(self) -> str:
        return self.fingerprint


@dataclass(frozen=True)
class RecallKey:
    """Where a description is remembered: the weights' identity (``fingerprint``) and the rest of the key."""

    fingerprint: str
    inputs: dict[str, Any]


def recall_key(study: StudyRun, recipe: ModelRecipe) -> RecallKey | None:
    """The key of ``recipe``'s description, found without loading; None when its weights cannot be identified so."""
    from auditor.core.devices import pick_device

    options = study.load_options()
    identity = recipe.backends().identify(recipe.spec, options=options)
    if identity is None:
        return None
    inputs = {
        "kind": recipe.registry,
        "spec": recipe.spec,
        "device": pick_device(options.device),
        "allow_partial_weights": options.allow_partial_weights,
        "settings": _settings(recipe.settings),
    }
    return RecallKey(settings_fingerprint(identity, recall=RECALL_FORMAT), inputs)


def load_remembering(study: StudyRun, recipe: ModelRecipe, load: Callable[[], Any]) -> Any:
    """``load()`` (which loads ``recipe`` and readies the model), remembering what the model says about itself when
    its files were the same before and after the load (a folder a trainer rewrites meanwhile is not remembered)."""
    before = recall_key(study, recipe)
    model = load()
    if before is not None and recall_key(study, recipe) == before:
        _remember(study, before, model)
    return model


def recall(study: StudyRun, recipe: ModelRecipe) -> RecalledModel | None:
    """The model as an earlier load of ``recipe`` described it, or None when no load with the same key was
    remembered (or the description no longer reads as this auditor's records)."""
    key = recall_key(study, recipe)
    found = None if key is None else study.cache.get_json(STAGE, key.fingerprint, key.inputs)
    if found is None:
        return None
    try:
        settings = found["settings"]
        return RecalledModel(
            ref=ModelRef.model_validate(found["ref"]),
            settings=None if settings is None else type(recipe.settings).model_validate(settings),
            seeded=found["seeded"],
            fingerprint=found["cache_fingerprint"],
        )
    except (KeyError, TypeError, ValidationError):
        return None


def check_recalled(recalled: RecalledModel, loaded: Any) -> None:
    """A model loaded after its description was recalled (a result was missing) must be the model described: the
    results looked up so far were keyed on the description."""
    if loaded.cache_fingerprint() != recalled.fingerprint or loaded.ref != recalled.ref:
        raise AuditorError(
            f"model {recalled.ref.spec} loaded as another model than the one its files were remembered as "
            "(they changed during the run?); run again with --resume"
        )


def _remember(study: StudyRun, key: RecallKey, model: Any) -> None:
    """Remember ``model``'s description under ``key``, and under the settings it runs with as the ones asked: a
    resumed run asks for those (its record's), and a load with them describes the same model and settings."""
    settings = getattr(model, "settings", None)
    value = {
        "ref": model.ref.model_dump(mode="json"),
        "settings": None if settings is None else settings.model_dump(mode="json"),
        "seeded": getattr(model, "seeded", None),
        "cache_fingerprint": model.cache_fingerprint(),
    }
    for asked in dict.fromkeys([key.inputs["settings"], _settings(settings)]):
        study.cache.put_json(STAGE, key.fingerprint, {**key.inputs, "settings": asked}, value)


def _settings(settings: Any) -> str | None:
    return None if settings is None else settings.model_dump_json()
