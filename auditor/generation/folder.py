"""``folder:<dir>``: audit images made elsewhere (a black-box model, a web UI, another lab).

The folder says which images belong to which prompt in one of two ways:

* a manifest, ``manifest.json`` / ``manifest.yaml`` / ``manifest.yml``, either
  ``{prompt: [file, ...]}`` or ``[{"prompt": ..., "files": [...]}, ...]``, files relative
  to the folder;
* a sub-folder per prompt, named by the prompt's slug (lower case, every run of
  characters other than a-z and 0-9 turned into ``-``, as :func:`auditor.core.store.slugify`)
  or holding a ``prompt.txt`` with the prompt; its images are taken in file-name order.

Prompts are matched by slug, so case and punctuation differences do not matter. Image i
of a prompt is its i-th file. Every image is opened when the backend loads, so missing or
unreadable files are reported together, in one error, before any work starts.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.core.errors import AuditorError, ImagesMissingError
from auditor.core.registry import Spec
from auditor.core.store import read_text_file, slugify
from auditor.core.text import first_few, single_spaced
from auditor.core.weights import LoadOptions
from auditor.generation.base import GeneratedPicture, GenerationItem
from auditor.records import GenerationSettings, ModelRef

MANIFEST_NAMES = ("manifest.json", "manifest.yaml", "manifest.yml")
PROMPT_FILE = "prompt.txt"


def prompt_key(prompt: str) -> str:
    """The untruncated slug a prompt is matched by (and a per-prompt folder is named by)."""
    return slugify(prompt, max_length=len(prompt) + 1)


@dataclass(frozen=True)
class _PromptImages:
    """The images of one prompt, in index order, with their bytes' sha256."""

    label: str
    files: tuple[Path, ...]
    hashes: tuple[str, ...]


class FolderImages:
    """Images of a folder served as if generated: ``generate`` returns the item's i-th file."""

    seeded = False

    def __init__(self, ref: ModelRef, prompts: dict[str, _PromptImages], settings: GenerationSettings):
        self.ref = ref
        self._prompts = prompts
        #: Only ``batch_size`` applies (how many files are read per call): the images are made already.
        self.settings = settings.model_copy(update=dict.fromkeys(GenerationSettings.IMAGE_OPTIONS, None))

    def cache_fingerprint(self) -> str:
        return self.ref.fingerprint or ""

    def check(self, items: Sequence[GenerationItem]) -> None:
        """Refuse items the folder has no image for, every one in one error (the generate stage checks all the
        images it is to make before the first batch, so a rerun need not find them one batch at a time)."""
        problems = [problem for item in items if (problem := self._lacking(item))]
        if problems:
            raise ImagesMissingError(f"folder {self.ref.model_id}: " + _join(list(dict.fromkeys(problems))))

    def generate(self, items: Sequence[GenerationItem]) -> list[GeneratedPicture]:
        from PIL import Image

        self.check(items)
        pictures = []
        for item in items:
            with Image.open(self._prompts[prompt_key(item.prompt)].files[item.index]) as image:
                pictures.append(GeneratedPicture(image=image.convert("RGB")))
        return pictures

    def _lacking(self, item: GenerationItem) -> str | None:
        entry = self._prompts.get(prompt_key(item.prompt))
        if entry is None:
            known = first_few([repr(p.label) for p in self._prompts.values()], 5)
            return f"no images for prompt {item.prompt!r} (it has images for {known})"
        if item.index >= len(entry.files):
            return f"prompt {item.prompt!r} has {len(entry.files)} images, image {item.index + 1} was asked for"
        return None


def preflight(spec: Spec) -> Path:
    """The folder ``spec.target`` names, checked before a run is made for it: it exists and is a folder."""
    if not spec.target:
        raise AuditorError("the folder backend needs a folder: --t2i folder:<dir>")
    root = Path(spec.target).expanduser()
    if not root.is_dir():
        raise AuditorError(f"image folder {spec.target!r} does not exist or is not a folder")
    return root


def load(spec: Spec, settings: GenerationSettings | None = None, options: LoadOptions | None = None) -> FolderImages:
    """Read and check the folder named by ``spec.target``; ``settings`` and load ``options`` do not apply."""
    root = preflight(spec)
    listing = _read_manifest(root) or _read_prompt_folders(root)
    if not listing:
        raise AuditorError(
            f"image folder {spec.target!r} has no {' / '.join(MANIFEST_NAMES)} and no sub-folder of images per prompt"
        )
    prompts: dict[str, _PromptImages] = {}
    problems: list[str] = []
    for label, files in listing:
        key = prompt_key(label)
        if key in prompts:
            problems.append(f"two entries for the prompt {label!r}")
            continue
        hashes = []
        for file in files:
            digest, problem = _check_image(root, file)
            hashes.append(digest)
            if problem:
                problems.append(problem)
        prompts[key] = _PromptImages(label=label, files=tuple(files), hashes=tuple(hashes))
    if problems:
        raise AuditorError(f"image folder {spec.target!r}: " + _join(problems))
    digest = hashlib.sha256()
    for key in sorted(prompts):
        digest.update(f"{key} {' '.join(prompts[key].hashes)}\n".encode())
    ref = ModelRef(spec=str(spec), backend=spec.prefix, model_id=str(root.resolve()), fingerprint=digest.hexdigest())
    return FolderImages(ref, prompts, settings or GenerationSettings())


def _read_manifest(root: Path) -> list[tuple[str, list[Path]]] | None:
    """``(prompt, files)`` from the folder's manifest, or None when it has none."""
    path = next((root / name for name in MANIFEST_NAMES if (root / name).is_file()), None)
    if path is None:
        return None
    import yaml

    text = read_text_file(path)
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise AuditorError(f"cannot read {path}: {single_spaced(str(exc))}") from exc
    if isinstance(data, dict):
        entries = [{"prompt": prompt, "files": files} for prompt, files in data.items()]
    elif isinstance(data, list):
        entries = data
    else:
        raise AuditorError(f"{path}: expected {{prompt: [files]}} or a list of {{prompt, files}}")
    listing = []
    for number, entry in enumerate(entries, start=1):
        prompt = entry.get("prompt") if isinstance(entry, dict) else None
        files = entry.get("files") if isinstance(entry, dict) else None
        if not isinstance(prompt, str) or not prompt.strip() or not isinstance(files, list) or not files:
            raise AuditorError(f"{path}: entry {number} needs a non-empty 'prompt' and a non-empty list of 'files'")
        if not all(isinstance(f, str) for f in files):
            raise AuditorError(f"{path}: the files of {prompt!r} must be file names")
        listing.append((prompt, [root / f for f in files]))
    return listing


def _read_prompt_folders(root: Path) -> list[tuple[str, list[Path]]]:
    """``(prompt, files)`` per non-hidden sub-folder: prompt from ``prompt.txt`` or the folder name."""
    listing = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        prompt_file = folder / PROMPT_FILE
        label = read_text_file(prompt_file).strip() if prompt_file.is_file() else ""
        files = sorted(
            p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.name != PROMPT_FILE
        )
        listing.append((label or folder.name, files))
    return listing


def _check_image(root: Path, file: Path) -> tuple[str, str | None]:
    """``(sha256 of the bytes, problem or None)``: the file must exist and decode as an image."""
    from PIL import Image, UnidentifiedImageError

    shown = file.relative_to(root) if file.is_relative_to(root) else file
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return "", f"missing {shown}"
    except OSError as exc:
        return "", f"cannot read {shown} ({exc.strerror or exc})"
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return "", f"not a readable image: {shown}"
    return hashlib.sha256(data).hexdigest(), None


def _join(problems: list[str]) -> str:
    """Every problem, on one line: fixing them one rerun at a time would be slow."""
    return f"{len(problems)} problem(s): " + "; ".join(problems)
