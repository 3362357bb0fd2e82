"""The one-face filter, OpenCV's Haar cascade on built images, and the MediaPipe backend's errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from PIL import Image

from auditor.core.errors import AuditorError
from auditor.perception.faces import FaceBox, face_filter
from auditor.perception.registry import FACE_DETECTORS


def _box(width: float, height: float) -> FaceBox:
    return FaceBox(0.2, 0.2, width, height)


def test_filter_follows_the_authors_order_of_checks():
    assert face_filter([]) == "no_face"
    # Two faces are "many_faces" even when both are small: the count is checked first.
    assert face_filter([_box(0.05, 0.05), _box(0.05, 0.05)]) == "many_faces"
    assert face_filter([_box(0.5, 0.5), _box(0.4, 0.4)]) == "many_faces"
    assert face_filter([_box(0.09, 0.5)]) == "small_face"  # too narrow
    assert face_filter([_box(0.5, 0.0999)]) == "small_face"  # too short
    assert face_filter([_box(0.1, 0.1)]) == "kept"  # at least 0.1 of each side
    assert face_filter([_box(0.3, 0.3)], min_height=0.5) == "small_face"


# --------------------------------------------------------------------------- Haar cascade


@pytest.fixture(scope="module")
def haar():
    pytest.importorskip("cv2", reason="OpenCV is not installed (pip install 'auditor[amplification]')")
    try:
        return FACE_DETECTORS.load("haar")
    except AuditorError as exc:  # e.g. an OpenCV 5 wheel without cascades
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def portrait() -> Image.Image:
    """Grace Hopper's portrait (600 x 512), a real photograph that matplotlib ships as sample data."""
    from matplotlib import cbook

    return Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)).convert("RGB")


def test_haar_finds_the_one_face_of_a_portrait(haar, portrait):
    boxes = haar.detect(portrait)
    assert len(boxes) == 1
    (box,) = boxes
    # The face is in the upper middle, about 0.4 of the image wide.
    assert 0.25 < box.width < 0.6 and 0.2 < box.height < 0.55
    assert 0.15 < box.left + box.width / 2 < 0.85 and box.top + box.height / 2 < 0.6
    assert face_filter(boxes) == "kept"


def test_haar_on_built_images(haar, portrait):
    blank = Image.new("RGB", (512, 512), (128, 128, 128))
    assert face_filter(haar.detect(blank)) == "no_face"
    pair = Image.new("RGB", (portrait.width * 2, portrait.height), "white")
    pair.paste(portrait, (0, 0))
    pair.paste(portrait, (portrait.width, 0))
    assert face_filter(haar.detect(pair)) == "many_faces"
    # The portrait at a third of its size on a large canvas: one face, under 0.1 of each side.
    small = portrait.resize((portrait.width // 3, portrait.height // 3))
    canvas = Image.new("RGB", (1400, 1400), "white")
    canvas.paste(small, (600, 600))
    boxes = haar.detect(canvas)
    assert len(boxes) == 1 and boxes[0].width < 0.1
    assert face_filter(boxes) == "small_face"


def test_haar_identity(haar, tmp_path):
    assert haar.name == "haar:haarcascade_frontalface_default.xml"
    assert haar.settings["min_neighbors"] == 5 and haar.settings["scale_factor"] == 1.1
    again = FACE_DETECTORS.load("haar:haarcascade_frontalface_default.xml")
    assert again.cache_fingerprint() == haar.cache_fingerprint()
    other = FACE_DETECTORS.load("haar:haarcascade_frontalface_alt2.xml")
    assert other.cache_fingerprint() != haar.cache_fingerprint()
    # A copy of the cascade by path is the same detector.
    copy = tmp_path / "haarcascade_frontalface_default.xml"
    copy.write_bytes(haar.cascade.read_bytes())
    assert FACE_DETECTORS.load(f"haar:{copy}").cache_fingerprint() == haar.cache_fingerprint()


def test_haar_errors(haar, tmp_path):
    with pytest.raises(AuditorError, match="no Haar cascade 'nope.xml'"):
        FACE_DETECTORS.load("haar:nope.xml")
    with pytest.raises(AuditorError, match="no such Haar cascade file"):
        FACE_DETECTORS.load(f"haar:{tmp_path}/missing/cascade.xml")
    junk = tmp_path / "junk.xml"
    junk.write_text("<opencv_storage></opencv_storage>")
    with pytest.raises(AuditorError, match="not a cascade XML file"):
        FACE_DETECTORS.load(f"haar:{junk}")
    listed = r"unknown face detector backend .*: use one of haar, mediapipe:\.\.\. or a local"  # haar alone is whole
    with pytest.raises(AuditorError, match=listed):
        FACE_DETECTORS.check("dlib:model.dat")


# --------------------------------------------------------------------------- MediaPipe


def test_mediapipe_needs_an_existing_model_file(tmp_path):
    with pytest.raises(AuditorError, match="needs its model file"):
        FACE_DETECTORS.preflight("mediapipe")
    with pytest.raises(AuditorError, match="no such MediaPipe face model file"):
        FACE_DETECTORS.preflight(f"mediapipe:{tmp_path}/blaze_face.tflite")


def test_mediapipe_missing_is_one_line(tmp_path, monkeypatch):
    model = tmp_path / "blaze_face.tflite"
    model.write_bytes(b"\0" * 16)
    monkeypatch.setitem(sys.modules, "mediapipe", None)  # as if it were not installed
    with pytest.raises(AuditorError, match="needs the mediapipe package: pip install 'auditor\\[mediapipe\\]'"):
        FACE_DETECTORS.load(f"mediapipe:{model}")


def test_mediapipe_refuses_a_file_that_is_not_a_model(tmp_path):
    pytest.importorskip("mediapipe", reason="mediapipe is not installed (pip install 'auditor[mediapipe]')")
    model = tmp_path / "blaze_face.tflite"
    model.write_bytes(b"not a flatbuffer")
    with pytest.raises(AuditorError, match="cannot load the MediaPipe face model .*blaze_face.tflite"):
        FACE_DETECTORS.load(f"mediapipe:{model}")


def test_mediapipe_detects_a_face_with_a_real_model(portrait):
    """Needs a BlazeFace .tflite (not in the mediapipe wheel, no download here): AUDITOR_TEST_BLAZEFACE=/path."""
    pytest.importorskip("mediapipe", reason="mediapipe is not installed (pip install 'auditor[mediapipe]')")
    model = os.environ.get("AUDITOR_TEST_BLAZEFACE")
    if not model or not Path(model).is_file():
        pytest.skip("no BlazeFace model file: the mediapipe wheel ships none; set AUDITOR_TEST_BLAZEFACE=/path/to/face.tflite")
    detector = FACE_DETECTORS.load(f"mediapipe:{model}")
    assert detector.name == f"mediapipe:{model}" and detector.settings["min_confidence"] == 0.5
    assert face_filter(detector.detect(portrait)) == "kept"
    assert face_filter(detector.detect(Image.new("RGB", (256, 256), "gray"))) == "no_face"
