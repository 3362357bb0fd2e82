"""Image embedders (dinov2:, hf-vision:), open-vocabulary detectors and SAM on tiny random models."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from PIL import Image

from auditor.core.errors import AuditorError, BackendError
from auditor.perception.detectors import Detection, grounded_detections, label_token_positions
from auditor.perception.registry import DETECTORS, EMBEDDERS, SEGMENTERS

LABELS = ["Pharmacist", "white coat", "pharmacist "]
VOCABULARY = {"pharmacist", "white coat"}


def _images(*sizes: tuple[int, int]) -> list[Image.Image]:
    """Random RGB images of the given (width, height)."""
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


def _unit(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


# --------------------------------------------------------------------------- embedders


def test_dinov2_embeds_unit_cls_rows_in_batches(tiny_tracing_models):
    import torch
    from transformers import AutoImageProcessor, Dinov2Model

    images = _images((40, 30), (32, 32), (20, 50))
    embedder = EMBEDDERS.load(f"dinov2:{tiny_tracing_models.dinov2}", batch_size=2)
    rows = embedder.embed_images(images)
    assert rows.shape == (3, 32) and rows.dtype == np.float32 and embedder.dimension == 32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-6)
    # DINOv2's image vector is its CLS token after the final layer norm, whatever the batch.
    model = Dinov2Model.from_pretrained(tiny_tracing_models.dinov2).eval()
    pixels = AutoImageProcessor.from_pretrained(tiny_tracing_models.dinov2)(images=images, return_tensors="pt")
    with torch.inference_mode():
        cls = model(**pixels).last_hidden_state[:, 0]
    np.testing.assert_allclose(rows, _unit(cls.numpy()), atol=1e-5)
    one_by_one = EMBEDDERS.load(f"dinov2:{tiny_tracing_models.dinov2}", batch_size=1).embed_images(images)
    np.testing.assert_allclose(one_by_one, rows, atol=1e-5)
    assert embedder.embed_images([]).shape == (0, 32)


def test_a_vit_without_pooler_weights_embeds_its_cls_token(tiny_tracing_models):
    import torch
    from transformers import AutoImageProcessor, ViTModel

    embedder = EMBEDDERS.load(f"hf-vision:{tiny_tracing_models.vit}")
    assert embedder.model.pooler is None  # dropped, not randomly initialised
    assert embedder.ref.partial_weights == [] and embedder.ref.backend == "hf-vision"
    images = _images((40, 30), (32, 32))
    model = ViTModel.from_pretrained(tiny_tracing_models.vit, add_pooling_layer=False).eval()
    pixels = AutoImageProcessor.from_pretrained(tiny_tracing_models.vit)(images=images, return_tensors="pt")
    with torch.inference_mode():
        cls = model(**pixels).last_hidden_state[:, 0]
    np.testing.assert_allclose(embedder.embed_images(images), _unit(cls.numpy()), atol=1e-5)


def test_a_checkpoint_missing_other_weights_is_still_refused(tiny_tracing_models, tmp_path):
    from safetensors.torch import load_file, save_file

    broken = tmp_path / "vit"
    shutil.copytree(tiny_tracing_models.vit, broken)
    tensors = load_file(broken / "model.safetensors")
    dropped = next(name for name in tensors if "encoder.layer.0" in name)
    del tensors[dropped]
    save_file(tensors, broken / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(BackendError, match="does not match the model") as caught:
        EMBEDDERS.load(f"hf-vision:{broken}")
    assert "\n" not in str(caught.value) and "--allow-partial-weights" in str(caught.value)


def test_image_embedders_refuse_what_they_cannot_embed(tiny_tracing_models, tiny_models):
    embedder = EMBEDDERS.load(f"dinov2:{tiny_tracing_models.dinov2}")
    with pytest.raises(AuditorError, match=r"embeds images only, not texts; .*clip:") as caught:
        embedder.embed_texts(["a photo of a pharmacist"])
    assert "\n" not in str(caught.value)
    with pytest.raises(BackendError, match=r"it is a 'vit' model, not 'dinov2' or 'dinov2_with_registers'"):
        EMBEDDERS.load(f"dinov2:{tiny_tracing_models.vit}")
    with pytest.raises(BackendError, match="is not a vision backbone .* use clip: for CLIP models"):
        EMBEDDERS.load(f"hf-vision:{tiny_models.clip}")
    with pytest.raises(AuditorError, match="needs a model: --embedder dinov2:<hub id or folder>"):
        EMBEDDERS.load("dinov2:")


def test_image_embedder_fingerprints_follow_the_weights(tiny_tracing_models):
    dinov2 = EMBEDDERS.load(f"dinov2:{tiny_tracing_models.dinov2}")
    assert EMBEDDERS.load(f"hf-vision:{tiny_tracing_models.dinov2}", batch_size=3).cache_fingerprint() == (
        dinov2.cache_fingerprint()
    )  # same weights, same vector: the prefix and batch size do not matter
    assert EMBEDDERS.load(f"hf-vision:{tiny_tracing_models.vit}").cache_fingerprint() != dinov2.cache_fingerprint()
    assert (dinov2.ref.dtype, dinov2.ref.device) == ("float32", "cpu")


def test_bare_folders_are_recognised_by_their_model_type(tiny_tracing_models):
    assert str(EMBEDDERS.check(str(tiny_tracing_models.dinov2))) == f"dinov2:{tiny_tracing_models.dinov2}"
    assert str(DETECTORS.check(str(tiny_tracing_models.grounding_dino))).startswith("grounding-dino:")
    assert str(DETECTORS.check(str(tiny_tracing_models.owlv2))).startswith("owlv2:")
    assert str(SEGMENTERS.check(str(tiny_tracing_models.sam))).startswith("sam:")
    with pytest.raises(AuditorError, match=r"unknown detector backend .* grounding-dino:\.\.\., owlv2:\.\.\."):
        DETECTORS.check(str(tiny_tracing_models.vit))


# --------------------------------------------------------------------------- detectors


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_grounded_detections_keep_boxes_by_any_token_and_label_them_by_their_labels_tokens():
    import torch

    # Caption "pharmacist. white coat." -> [CLS] pharma ##cist . white coat . [SEP]
    positions = [[1, 2], [4, 5]]
    probabilities = torch.full((1, 4, 10), 0.01)
    probabilities[0, :, 8:] = 0.0  # past the caption (the model gives -inf logits there)
    probabilities[0, 0, 2] = 0.9  # pharmacist
    probabilities[0, 1, 3] = 0.6  # only the "." token: a box, but no label reaches the text threshold
    probabilities[0, 1, 1] = 0.2
    probabilities[0, 2, 4] = 0.3  # white coat, below the box threshold
    probabilities[0, 3, 1], probabilities[0, 3, 5] = 0.5, 0.7  # both; white coat wins
    logits = torch.logit(probabilities)
    boxes = torch.tensor([[[0.5, 0.5, 0.2, 0.4], [0.5, 0.5, 0.1, 0.1], [0.5, 0.5, 0.1, 0.1], [0.05, 0.5, 0.2, 0.2]]])
    (found,) = grounded_detections(logits, boxes, positions, ["pharmacist", "white coat"], [(100, 200)], 0.35, 0.25)
    assert [d.label for d in found] == ["pharmacist", "white coat"]
    assert [d.score for d in found] == pytest.approx([0.9, 0.7])
    assert found[0].box == pytest.approx((80.0, 30.0, 120.0, 70.0))  # (cx, cy, w, h) relative -> corners in pixels
    assert found[1].box == pytest.approx((0.0, 40.0, 30.0, 60.0))  # x0 = -10 clipped to the image
    (none,) = grounded_detections(logits, boxes, positions, ["pharmacist", "white coat"], [(100, 200)], 0.95, 0.25)
    assert none == []


def test_label_token_positions_cover_each_labels_tokens(tiny_tracing_models):
    from transformers import AutoProcessor

    tokenizer = AutoProcessor.from_pretrained(tiny_tracing_models.grounding_dino).tokenizer
    vocabulary = ["pharmacist", "white coat", "counter"]
    positions = label_token_positions(tokenizer, vocabulary)
    ids = tokenizer("pharmacist. white coat. counter.")["input_ids"]
    assert [tokenizer.decode([ids[p] for p in label]) for label in positions] == vocabulary
    assert len(positions[1]) >= 2  # two words, every token of both


def _check_detections(images, found, labels=VOCABULARY):
    assert len(found) == len(images)
    for image, row in zip(images, found):
        assert all(isinstance(d, Detection) and d.label in labels for d in row)
        assert [d.score for d in row] == sorted((d.score for d in row), reverse=True)
        for d in row:
            x0, y0, x1, y1 = d.box
            assert 0 <= x0 <= x1 <= image.width and 0 <= y0 <= y1 <= image.height


@pytest.mark.parametrize("prefix", ["grounding-dino", "owlv2"])
def test_detectors_find_only_the_requested_labels_in_pixel_boxes(tiny_tracing_models, prefix):
    folder = getattr(tiny_tracing_models, prefix.replace("-", "_"))
    images = _images((40, 30), (40, 30), (40, 30))
    everything = DETECTORS.load(f"{prefix}:{folder}", box_threshold=0.0, batch_size=2)
    found = everything.detect(images, LABELS)
    _check_detections(images, found)
    assert all(found)  # with no box threshold, random weights find something everywhere
    assert {d.label for row in found for d in row} <= VOCABULARY
    one_by_one = DETECTORS.load(f"{prefix}:{folder}", box_threshold=0.0, batch_size=1).detect(images, LABELS)
    assert [[d.label for d in row] for row in one_by_one] == [[d.label for d in row] for row in found]
    np.testing.assert_allclose(
        [d.box for row in one_by_one for d in row], [d.box for row in found for d in row], atol=1e-3
    )
    # A threshold keeps exactly the boxes scoring above it.
    scores = sorted(d.score for d in found[0])
    middle = (scores[len(scores) // 2 - 1] + scores[len(scores) // 2]) / 2
    stricter = DETECTORS.load(f"{prefix}:{folder}", box_threshold=middle).detect(images[:1], LABELS)[0]
    kept = [d for d in found[0] if d.score > middle]
    assert [d.label for d in stricter] == [d.label for d in kept]
    assert [d.score for d in stricter] == pytest.approx([d.score for d in kept], abs=1e-5)  # alone, not in a batch
    assert DETECTORS.load(f"{prefix}:{folder}", box_threshold=1.0).detect(images[:1], LABELS) == [[]]


def test_detector_settings_and_labels_are_checked(tiny_tracing_models):
    gd = DETECTORS.load(f"grounding-dino:{tiny_tracing_models.grounding_dino}")
    assert (gd.box_threshold, gd.text_threshold) == (0.35, 0.25)  # Grounding DINO's defaults
    assert DETECTORS.load(f"owlv2:{tiny_tracing_models.owlv2}").box_threshold == 0.1
    other = DETECTORS.load(f"grounding-dino:{tiny_tracing_models.grounding_dino}", text_threshold=0.3)
    assert other.cache_fingerprint() != gd.cache_fingerprint()
    with pytest.raises(AuditorError, match="no text threshold"):
        DETECTORS.load(f"owlv2:{tiny_tracing_models.owlv2}", text_threshold=0.3)
    with pytest.raises(AuditorError, match="box threshold must be between 0 and 1"):
        DETECTORS.load(f"owlv2:{tiny_tracing_models.owlv2}", box_threshold=1.5)
    image = _images((32, 32))
    with pytest.raises(AuditorError, match="at least one label"):
        gd.detect(image, [])
    with pytest.raises(AuditorError, match=r"contain no '\.': 'lab coat\. hat'"):
        gd.detect(image, ["lab coat. hat"])
    with pytest.raises(AuditorError, match="over 64 tokens"):
        gd.detect(image, [f"label {chr(97 + i % 26)}" for i in range(40)])
    with pytest.raises(BackendError, match=r"cannot load object detector model '\./nope': no such folder; "
                       r"pass --detector owlv2:/path/to/local/copy"):
        DETECTORS.load("owlv2:./nope")


# --------------------------------------------------------------------------- SAM


def test_sam_turns_boxes_into_image_sized_masks(tiny_tracing_models):
    images = _images((40, 30), (32, 32), (50, 20))
    boxes = [[(1, 2, 20, 25), (0, 0, 40, 30)], [], [(10, 5, 30, 15)]]
    segmenter = SEGMENTERS.load(f"sam:{tiny_tracing_models.sam}", batch_size=2)
    masks = segmenter.segment(images, boxes)
    assert [m.shape for m in masks] == [(2, 30, 40), (0, 32, 32), (1, 20, 50)]
    assert all(m.dtype == bool for m in masks)
    assert masks[0].any() and not masks[0].all()  # random weights, but a real thresholded mask
    again = SEGMENTERS.load(f"sam:{tiny_tracing_models.sam}", batch_size=1).segment(images, boxes)
    assert all(np.array_equal(a, b) for a, b in zip(again, masks))
    with pytest.raises(AuditorError, match="box lists for 1 images and 3 images"):
        segmenter.segment(images, boxes[:1])


# --------------------------------------------------------------------------- the tiny models


def test_tiny_tracing_models_are_complete_reused_and_deterministic(tiny_tracing_models, tmp_path):
    from auditor.tiny import COMPLETE_MARKER, build_tiny_tracing_models
    from auditor.tiny.perception import build_dinov2, build_owlv2

    for name in ("t2i", "dinov2", "vit", "grounding_dino", "owlv2", "sam"):
        assert (getattr(tiny_tracing_models, name) / COMPLETE_MARKER).is_file()
    weights = tiny_tracing_models.sam / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_tiny_tracing_models(tiny_tracing_models.t2i.parent) == tiny_tracing_models
    assert weights.stat().st_mtime_ns == before
    for name, build in (("dinov2", build_dinov2), ("owlv2", build_owlv2)):
        build(tmp_path / name, 0)
        original = getattr(tiny_tracing_models, name) / "model.safetensors"
        assert (tmp_path / name / "model.safetensors").read_bytes() == original.read_bytes()
