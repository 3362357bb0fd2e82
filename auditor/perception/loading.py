"""Loading a transformers model and its processor for a perception backend, the house way.

One place for what every ``from_pretrained`` loader here does: the device and dtype
(float16 on CUDA, float32 on CPU), the hub decided once (:func:`hub_options`), quiet
libraries, one-line load errors, a refusal of folders of another model type, the loading
report checked for missing or mismatched tensors (:func:`check_complete`), and the
record's :class:`ModelRef`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from auditor.core.errors import AuditorError, BackendError
from auditor.core.registry import Spec, quoted_types
from auditor.core.weights import (
    LoadOptions,
    check_complete,
    dtype_keyword,
    hub_options,
    loaded_model_ref,
    loading_model,
    loading_problems,
    weights_identity,
)
from auditor.records import ModelRef


def identify(spec: Spec, options: LoadOptions = LoadOptions()) -> str | None:
    """What a transformers loader here (VQA, CLIP, vision encoders) would read for ``spec``, told without loading
    (:func:`~auditor.core.weights.weights_identity`)."""
    return weights_identity(spec, "config.json", options, "transformers")


@dataclass
class LoadedModel:
    """A model in eval mode on its device, its processor, and the record's reference to it."""

    model: Any
    processor: Any
    ref: ModelRef


def load_pretrained(
    spec: Spec,
    options: LoadOptions,
    *,
    what: str,
    option: str,
    model_class: str,
    processor_class: str,
    model_types: Collection[str] | None = None,
    settle: Callable[[Any, list[str]], list[str]] | None = None,
) -> LoadedModel:
    """Load ``spec.target`` as transformers' ``model_class`` with its ``processor_class``.

    ``what`` names the kind of model in messages ("object detector"), ``option`` the
    command-line option that takes it ("--detector"). ``model_types`` (the config's
    ``model_type``), when given, are the only ones accepted. ``settle(model, problems)``
    may deal with some loading problems itself and returns those left (the vision
    embedder drops a pooler its checkpoint has no weights for).
    """
    import transformers

    from auditor.core.devices import pick_device, pick_dtype

    model_id = spec.target
    if not model_id:
        raise AuditorError(f"the {spec.prefix} {what} needs a model: {option} {spec.prefix}:<hub id or folder>")
    device = pick_device(options.device)
    dtype = pick_dtype(device)
    hub = hub_options(model_id)
    hint = f"pass {option} {spec.prefix}:/path/to/local/copy"
    with loading_model(what, model_id, hint):
        if model_types is not None:
            model_type = transformers.AutoConfig.from_pretrained(model_id, **hub).model_type
            if model_type not in model_types:
                raise BackendError(
                    f"cannot load {what} model {model_id!r} as {spec.prefix}: it is a {model_type!r} model, "
                    f"not {quoted_types(model_types)}"
                )
        model, info = getattr(transformers, model_class).from_pretrained(
            model_id, output_loading_info=True, **{dtype_keyword("transformers"): dtype}, **hub
        )
        processor = getattr(transformers, processor_class).from_pretrained(model_id, **hub)
    problems = loading_problems(info)
    if settle is not None:
        problems = settle(model, problems)
    partial = check_complete(what, model_id, problems, options)
    model = model.to(device).eval()
    return LoadedModel(model, processor, loaded_model_ref(spec, "config.json", dtype, device, options, partial))


def on_model(inputs: Mapping[str, Any], model: Any) -> dict[str, Any]:
    """A processor's tensors moved to the model's device, the floating ones in its dtype (float16 on CUDA); token
    ids and masks keep their integer type."""
    return {
        name: value.to(model.device, dtype=model.dtype) if value.is_floating_point() else value.to(model.device)
        for name, value in inputs.items()
    }


def check_batch_size(batch_size: int, what: str) -> None:
    """Refuse a batch size below 1 for ``what`` ("the detector") in one line."""
    if batch_size < 1:
        raise AuditorError(f"{what}'s batch size must be at least 1 (got {batch_size})")
