"""Language data for concept extraction: NLTK's WordNet and English stopwords, offline.

WordNet comes, in order of preference, from any NLTK data folder that already has it,
from NLTK's downloader, or from the system's WordNet 3.0 files (Debian's ``wordnet-base``
and ``wordnet-sense-index``), copied into auditor's own NLTK data folder together with
the ``lexnames`` file NLTK needs and those packages lack.
"""

from __future__ import annotations

import os
import shutil
import socket
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.core.errors import AuditorError
from auditor.core.settings import get_settings

if TYPE_CHECKING:  # pragma: no cover
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

#: System folders that hold WordNet 3.0 database files (``WNSEARCHDIR`` first).
SYSTEM_WORDNET_DIRS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/usr/local/WordNet-3.0/dict")

#: The 45 lexicographer files of WordNet 3.0: number, name, syntactic category.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
    "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
    "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_WORDNET_FILES = [f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")] + [
    f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv")
]
_OPTIONAL_FILES = ("index.sense", "cntlist.rev", "LICENSE")


def lexnames_text() -> str:
    """The ``lexnames`` file NLTK's WordNet reader expects: ``NN<TAB>name<TAB>category``."""
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def _wordnet_target() -> Path:
    return get_settings().nltk_data_dir / "corpora" / "wordnet"


def _register_nltk_path() -> None:
    """Put auditor's NLTK data folder first on NLTK's path (moved there if ``NLTK_DATA`` names it later): the WordNet
    it holds is then the one read, which is what :func:`wordnet_identity` describes."""
    import nltk

    folder = str(get_settings().nltk_data_dir)
    if folder in nltk.data.path:
        nltk.data.path.remove(folder)
    nltk.data.path.insert(0, folder)


def wordnet_present() -> Path | None:
    """Folder NLTK would read WordNet from, or None."""
    import nltk

    _register_nltk_path()
    for root in nltk.data.path:
        for candidate in (Path(root) / "corpora" / "wordnet", Path(root) / "corpora" / "wordnet.zip"):
            if candidate.exists():
                return candidate
    return None


def wordnet_complete(candidate: Path) -> bool:
    """Whether ``candidate`` (a ``wordnet`` folder or ``wordnet.zip``) can be what NLTK reads: a folder with every
    database file and ``lexnames``, or a readable zip (its contents are checked when it loads). An interrupted
    download or build leaves neither."""
    import zipfile

    if candidate.suffix == ".zip":
        return zipfile.is_zipfile(candidate)
    return all((candidate / name).is_file() for name in [*_WORDNET_FILES, "lexnames"])


def find_system_wordnet() -> Path | None:
    """A system folder with the WordNet 3.0 database files NLTK needs."""
    folders = [os.environ["WNSEARCHDIR"]] if os.environ.get("WNSEARCHDIR") else []
    for folder in map(Path, folders + list(SYSTEM_WORDNET_DIRS)):
        if all((folder / name).is_file() for name in _WORDNET_FILES):
            return folder
    return None


def build_wordnet_from_system(source: Path, target: Path | None = None) -> Path:
    """Copy the system's WordNet files into an NLTK corpus folder and add ``lexnames``."""
    target = target or _wordnet_target()
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in _WORDNET_FILES + [n for n in _OPTIONAL_FILES if (source / n).is_file()]:
        shutil.copyfile(source / name, staging / name)
    (staging / "lexnames").write_text(lexnames_text(), encoding="ascii")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _try_nltk_download(timeout: float = 10.0) -> bool:
    """NLTK's own downloader, quietly: offline, its complaints are expected and the fallback follows."""
    import io
    import warnings

    import nltk

    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            folder = str(get_settings().nltk_data_dir)
            return bool(nltk.download("wordnet", download_dir=folder, quiet=True, print_error_to=io.StringIO()))
    except Exception:  # offline: any network error means "not downloaded"
        return False
    finally:
        socket.setdefaulttimeout(previous)


def ensure_wordnet(try_download: bool = True) -> Path:
    """Make WordNet readable by NLTK and return its folder; one clear error when impossible.

    A damaged copy in auditor's own data folder (an interrupted download or build) is removed and made again; one
    elsewhere (``NLTK_DATA``) is not auditor's to delete, and NLTK would read it first, so it is an error.
    """
    found = wordnet_present()
    if found is not None and not wordnet_complete(found) and found.parent == _wordnet_target().parent:
        if found.is_dir():
            shutil.rmtree(found)
        else:
            found.unlink()
        found = wordnet_present()
    if found is not None:
        if not wordnet_complete(found):
            raise AuditorError(f"WordNet at {found} is incomplete or damaged: delete it, then run `auditor setup`")
        return found
    if try_download and _try_nltk_download() and (found := wordnet_present()):
        return found
    system = find_system_wordnet()
    if system is not None:
        try:
            return build_wordnet_from_system(system)
        except OSError as exc:
            raise AuditorError(
                f"cannot write WordNet into {get_settings().nltk_data_dir}: {exc.strerror or exc} "
                "(AUDITOR_HOME must be a folder auditor can write)"
            ) from None
    raise AuditorError(
        "WordNet is missing: install it (Debian/Ubuntu: apt-get install wordnet-base wordnet-sense-index, "
        "then run `auditor setup`) or set NLTK_DATA to a folder holding corpora/wordnet"
    )


#: The index of each part of speech: what the WordNet reader reads whole when it loads.
_POS_INDEXES = frozenset(f"index.{pos}" for pos in ("noun", "verb", "adj", "adv"))


@lru_cache(maxsize=1)
def load_wordnet() -> WordNetCorpusReader:
    """The English WordNet corpus reader, loaded once per process.

    Not ``nltk.corpus.wordnet``: its reader also maps every synset to another WordNet
    version for the multilingual (OMW) functions, reading ``index.sense`` twice, which takes
    seconds at every start of a process that reads a word; auditor uses no other language.
    """
    import warnings
    import zipfile

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    from nltk.data import FileSystemPathPointer

    class EnglishWordNet(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> None:
            """No mapping between WordNet versions: only the multilingual functions need one."""
            return None

        def open(self, fileid: str) -> Any:
            """A part of speech's index, read once from start to end as the reader loads, as a plain text file:
            NLTK's own stream (made for the files it seeks in, ``index.sense`` among them) reads it a line at a
            time in Python, 0.4 s more per process."""
            stream = super().open(fileid)  # NLTK's checks of the path: inside the corpus, no link out of it
            if fileid in _POS_INDEXES and isinstance(self._root, FileSystemPathPointer):
                stream.close()
                return open(self._root.join(fileid).path, encoding=self._encoding)  # noqa: SIM115 - read in a with
            return stream

    ensure_wordnet()
    try:
        root = nltk.data.find("corpora/wordnet")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "the multilingual functions are not available": none are used
            return EnglishWordNet(root, None)
    except (LookupError, OSError, zipfile.BadZipFile) as exc:  # NLTK's message opens with a line of asterisks
        reason = next((line.strip() for line in str(exc).splitlines() if any(c.isalpha() for c in line)), "")
        raise AuditorError(f"WordNet could not be loaded: {reason or type(exc).__name__}") from None


#: Versions of WordNet whose data this process used without loading it: lemma names an earlier process read
#: and stored (:class:`auditor.scoring.concepts.LemmaStore`).
_REMEMBERED_VERSIONS: set[str] = set()


def loaded_wordnet_version() -> str | None:
    """The version of the WordNet this process has read (e.g. '3.0'), loaded or as lemma names stored from it, None
    when it has read none (nothing is loaded to find out): concepts depend on it, so a run records it."""
    if load_wordnet.cache_info().currsize:
        return load_wordnet().get_version()
    return min(_REMEMBERED_VERSIONS, default=None)


def used_remembered_wordnet(version: str) -> None:
    """Say that this process used lemma names stored from WordNet ``version`` (:func:`loaded_wordnet_version`)."""
    _REMEMBERED_VERSIONS.add(version)


def wordnet_identity() -> str | None:
    """What identifies the WordNet in auditor's own NLTK data folder, found without importing NLTK (about a second)
    or loading WordNet (two more): a hash of NLTK's version and the folder's files (names, sizes, modification
    times). NLTK reads that folder first (:func:`ensure_wordnet` puts it at the head of its path) unless it finds
    it unsafe: a folder or file on the way writable by others or owned by another account, or a link. Then, or
    where the folder holds no WordNet yet, None: the WordNet NLTK would read is not known without loading it."""
    import hashlib
    import json
    from importlib.metadata import PackageNotFoundError, version

    data = get_settings().nltk_data_dir
    folder = _wordnet_target()
    try:
        nltk_version = version("nltk")
        files = sorted(folder.iterdir())
        stats = [path.lstat() for path in (data, data / "corpora", folder, *files)]
    except (OSError, PackageNotFoundError):
        return None
    if not all(map(_private, stats)) or not set(_WORDNET_FILES) <= {path.name for path in files}:
        return None
    described = [nltk_version, [[path.name, st.st_size, st.st_mtime_ns] for path, st in zip(files, stats[3:])]]
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:20]


def reads_auditors_wordnet(reader: object) -> bool:
    """Whether a loaded WordNet reader reads the folder :func:`wordnet_identity` describes."""
    root = getattr(reader, "root", None)
    return root is not None and Path(str(root)).resolve() == _wordnet_target().resolve()


def _private(st: os.stat_result) -> bool:
    """NLTK's test of a data folder or file it will read: owned by this account or root, writable by no one else,
    and (stricter than NLTK, which follows a link after checking it) not a link."""
    import stat

    unshared = not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return st.st_uid in (os.geteuid(), 0) and unshared and not stat.S_ISLNK(st.st_mode)


@lru_cache(maxsize=1)
def english_stopwords() -> frozenset[str]:
    """NLTK's English stopword list (179 words), shipped inside the package."""
    text = resources.files("auditor").joinpath("data/stopwords_english.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())
