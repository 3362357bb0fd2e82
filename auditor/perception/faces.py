"""Face detection and the one-face filter of the bias-amplification study.

Gender is only classified on images that show one clear face (Seshadri et al. 2023, §2.2).
The authors' ``detect_faces`` (code/generate_images.py and code/face detection/
face_detection.py) labels an image, checking in this order:

1. no detection -> ``no_face``;
2. more than one -> ``many_faces``;
3. the one box is less than 0.1 of the image's height or less than 0.1 of its width
   -> ``small_face``;
4. otherwise the image is kept.

:func:`face_filter` is that rule over any detector's boxes. Detectors (``--face-detector``):

- ``haar`` (default): OpenCV's frontal-face Haar cascade, the XML file that
  ``opencv-python(-headless)`` 4.x ships in ``cv2.data.haarcascades`` (OpenCV 5 wheels no
  longer ship cascades, hence the ``<5`` pin of the ``amplification`` extra). Works
  offline; ``haar:<file name or path>`` picks another cascade.
- ``mediapipe:<path to .tflite>``: MediaPipe's BlazeFace through the Tasks API, the
  paper's detector family, at the authors' minimum confidence 0.5. The wheel ships no
  model file, so the user downloads one (e.g. ``blaze_face_short_range.tflite``); the
  authors used the legacy ``solutions.face_detection`` full-range model
  (``model_selection=1``), which recent MediaPipe wheels no longer include.

A detector's ``name`` and ``settings`` say which detector ran, and its
``cache_fingerprint`` covers its model file's contents and settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from auditor.core.choices import FaceVerdict
from auditor.core.errors import AuditorError
from auditor.core.fingerprint import file_sha256, settings_fingerprint
from auditor.core.registry import Spec

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

#: Smallest face box kept, as a share of the image's height and of its width (the authors' 0.1).
MIN_FACE_SHARE = 0.1
#: The cascade ``haar`` loads when no other is named.
DEFAULT_CASCADE = "haarcascade_frontalface_default.xml"
#: MediaPipe's minimum detection confidence in the authors' code.
MEDIAPIPE_MIN_CONFIDENCE = 0.5
_INSTALL_OPENCV = "pip install 'auditor[amplification]' (opencv-python-headless<5)"
_INSTALL_MEDIAPIPE = "pip install 'auditor[mediapipe]'"


@dataclass(frozen=True)
class FaceBox:
    """A detected face as shares of the image: left and top edge, width and height (1.0 = the whole image)."""

    left: float
    top: float
    width: float
    height: float


class FaceDetector(Protocol):
    """Finds faces in an image."""

    #: The detector as a spec (``haar:haarcascade_frontalface_default.xml``, ``mediapipe:/m/face.tflite``).
    name: str
    #: Settings that change its detections, for the record.
    settings: dict[str, Any]

    def cache_fingerprint(self) -> str:
        """Model file contents, library version and settings."""
        ...

    def detect(self, image: Image.Image) -> list[FaceBox]:
        """Every face found in ``image``."""
        ...


def face_filter(
    boxes: Sequence[FaceBox], min_height: float = MIN_FACE_SHARE, min_width: float = MIN_FACE_SHARE
) -> FaceVerdict:
    """The authors' one-clear-face rule (order of checks in the module docstring); a box of
    exactly ``min_height`` by ``min_width`` is kept."""
    if not boxes:
        return "no_face"
    if len(boxes) > 1:
        return "many_faces"
    if boxes[0].height < min_height or boxes[0].width < min_width:
        return "small_face"
    return "kept"


def _rgb_array(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))


# --------------------------------------------------------------------------- Haar cascade


class HaarFaceDetector:
    """OpenCV's ``CascadeClassifier.detectMultiScale`` on the grey-scale image."""

    def __init__(self, cascade: Path, scale_factor: float = 1.1, min_neighbors: int = 5, min_size: int = 30):
        import cv2

        self._cv2 = cv2
        self.cascade = cascade
        try:
            self._classifier = cv2.CascadeClassifier(str(cascade))
            loaded = not self._classifier.empty()
        except (cv2.error, SystemError):  # OpenCV raises for XML it cannot parse as a cascade
            loaded = False
        if not loaded:
            raise AuditorError(f"cannot load the Haar cascade {cascade}: not a cascade XML file")
        self.name = f"haar:{cascade.name}"
        self.settings = {
            "cascade": cascade.name,
            "scale_factor": scale_factor,
            "min_neighbors": min_neighbors,
            "min_size_px": min_size,
            "opencv": cv2.__version__,
        }
        self._digest = file_sha256(cascade)

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(self._digest, detector="haar", **self.settings)

    def detect(self, image: Image.Image) -> list[FaceBox]:
        cv2 = self._cv2
        grey = cv2.cvtColor(_rgb_array(image), cv2.COLOR_RGB2GRAY)
        height, width = grey.shape
        size = self.settings["min_size_px"]
        found = self._classifier.detectMultiScale(
            grey,
            scaleFactor=self.settings["scale_factor"],
            minNeighbors=self.settings["min_neighbors"],
            minSize=(size, size),
        )
        return [FaceBox(x / width, y / height, w / width, h / height) for x, y, w, h in np.asarray(found).reshape(-1, 4)]


def _cascade_path(target: str) -> Path:
    """A cascade by file name in OpenCV's data folder, or by path."""
    try:
        import cv2
    except ImportError as exc:
        raise AuditorError(f"the haar face detector needs OpenCV: {_INSTALL_OPENCV}") from exc
    name = target or DEFAULT_CASCADE
    given = Path(name).expanduser()
    if given.is_file():
        return given
    if len(given.parts) > 1:
        raise AuditorError(f"no such Haar cascade file: {name}")
    folder = getattr(getattr(cv2, "data", None), "haarcascades", None)
    if not folder or not (Path(folder) / name).is_file():
        raise AuditorError(
            f"OpenCV {cv2.__version__} has no Haar cascade {name!r} in its data folder "
            f"(OpenCV 5 wheels ship none): {_INSTALL_OPENCV}, or pass --face-detector haar:<path to cascade .xml>"
        )
    return Path(folder) / name


def load_haar(spec: Spec) -> HaarFaceDetector:
    """``haar`` or ``haar:<cascade file name or path>``."""
    return HaarFaceDetector(_cascade_path(spec.target))


def preflight_haar(spec: Spec) -> None:
    """Load the cascade once before a run folder is made (milliseconds): a file that is not a cascade is bad input
    a resume would repeat, not a failure to find after the images were made."""
    load_haar(spec)


# --------------------------------------------------------------------------- MediaPipe


class MediaPipeFaceDetector:
    """MediaPipe Tasks' ``FaceDetector`` (BlazeFace) with a user-supplied ``.tflite`` model."""

    def __init__(self, model: Path, min_confidence: float = MEDIAPIPE_MIN_CONFIDENCE):
        import mediapipe as mp
        from mediapipe.tasks.python import vision
        from mediapipe.tasks.python.core.base_options import BaseOptions

        self._mp = mp
        options = vision.FaceDetectorOptions(
            base_options=BaseOptions(model_asset_path=str(model)), min_detection_confidence=min_confidence
        )
        try:
            self._detector = vision.FaceDetector.create_from_options(options)
        except (OSError, ValueError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AuditorError(f"cannot load the MediaPipe face model {model}: {first}") from exc
        self.name = f"mediapipe:{model}"
        self.settings = {"model": model.name, "min_confidence": min_confidence, "mediapipe": mp.__version__}
        self._digest = file_sha256(model)

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(self._digest, detector="mediapipe", **self.settings)

    def detect(self, image: Image.Image) -> list[FaceBox]:
        pixels = _rgb_array(image)
        height, width = pixels.shape[:2]
        result = self._detector.detect(self._mp.Image(image_format=self._mp.ImageFormat.SRGB, data=pixels))
        boxes = []
        for detection in result.detections or ():
            box = detection.bounding_box  # pixels in the Tasks API
            boxes.append(FaceBox(box.origin_x / width, box.origin_y / height, box.width / width, box.height / height))
        return boxes


def preflight_mediapipe(spec: Spec) -> Path:
    """The model file a ``mediapipe:`` spec names, after checking it exists and MediaPipe is installed."""
    from importlib.util import find_spec

    if not spec.target:
        raise AuditorError(
            "the mediapipe face detector needs its model file: --face-detector mediapipe:<path to .tflite> "
            "(MediaPipe's wheel ships none; e.g. blaze_face_short_range.tflite)"
        )
    model = Path(spec.target).expanduser()
    if not model.is_file():
        raise AuditorError(f"no such MediaPipe face model file: {spec.target}")
    if find_spec("mediapipe") is None:
        raise AuditorError(f"the mediapipe face detector needs the mediapipe package: {_INSTALL_MEDIAPIPE}")
    return model


def load_mediapipe(spec: Spec) -> MediaPipeFaceDetector:
    """``mediapipe:<path to .tflite>``."""
    model = preflight_mediapipe(spec)
    try:
        import mediapipe  # noqa: F401
    except ImportError as exc:
        raise AuditorError(f"the mediapipe face detector needs the mediapipe package: {_INSTALL_MEDIAPIPE}") from exc
    return MediaPipeFaceDetector(model)
