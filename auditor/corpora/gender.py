"""Gender indicators in captions: gender words and, optionally, first names.

A caption is labelled ``male`` when it mentions only male indicators, ``female`` when only
female ones, ``both`` when it mentions both and ``none`` when it mentions neither, as in
the authors' helper code (``detect_gender_words`` and ``combine_labels`` of
github.com/preethiseshadri518/bias-amplification-paradox, code/detect_gender_helpers.py):

- **words**: the lists of ``prompts/amplification/gender_words.yaml``, matched as whole
  words in the lower-cased caption with regular-expression word boundaries (Python's
  Unicode ``\\b``, as theirs). So "He's", "MEN'S" and "(woman)" count, while "manager",
  "human", "woman" (for "man") and "mens_wear" do not; an apostrophe ends a word, so
  "he's" also matches through "he", and "men's" through "men".
- **names** (optional): the paper found person names with spaCy's ``en_core_web_lg`` NER
  and gave each the gender that the ``gender-guesser`` package assigns to its first
  known token (``male``/``mostly_male`` -> male, ``female``/``mostly_female`` -> female,
  androgynous and unknown ignored). spaCy's model is not a Python package on PyPI, so
  :class:`FirstNames` replaces the NER by a heuristic and records that it did: a name is
  a run of at least two capitalised words (initials such as "J." join a run; all-capital
  words such as "PHOTO" or "CEO" break it), and the first word of the run that
  gender-guesser knows gives its gender, as the first known token of an entity does in
  the authors' code. On the 21 example captions of the authors' notebook it gives their
  label for 20. Its weak spot is Title Case captions: capitalised common words that are
  also names ("Young", "Rock", "Art") then read as first names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from auditor.core.errors import AuditorError

GenderLabel = Literal["male", "female", "both", "none"]
#: gender-guesser's answers that count, and as what (the authors' ``label_dict``).
NAME_GENDERS = {"male": "male", "mostly_male": "male", "female": "female", "mostly_female": "female"}
_WORD = re.compile(r"[^\W\d_]+")


def combine(labels: Iterable[str]) -> GenderLabel:
    """One label from several (word label, name genders): the authors' ``combine_labels``.

    Only male indicators -> male, only female -> female, any mix or a ``both`` -> both,
    nothing -> none.
    """
    found = {label for label in labels if label in ("male", "female", "both")}
    if found == {"male"} or found == {"female"}:
        return next(iter(found))  # type: ignore[return-value]
    return "both" if found else "none"


@dataclass(frozen=True)
class GenderWords:
    """Male and female indicator words, matched whole-word and case-insensitively."""

    male: frozenset[str]
    female: frozenset[str]
    _pattern: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.male or not self.female:
            raise AuditorError("gender indicator words need at least one male and one female word")
        overlap = self.male & self.female
        if overlap:
            raise AuditorError(f"words listed as both male and female: {', '.join(sorted(overlap))}")
        # Longest first, so "he's" is reported as itself rather than as "he".
        words = sorted(self.male | self.female, key=lambda w: (-len(w), w))
        object.__setattr__(self, "_pattern", re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b"))

    @classmethod
    def builtin(cls) -> GenderWords:
        """The authors' lists, from ``prompts/amplification/gender_words.yaml``."""
        from auditor.core.resources import read_prompt_yaml

        return cls.from_data(read_prompt_yaml("amplification/gender_words.yaml"), "prompts/amplification/gender_words.yaml")

    @classmethod
    def from_data(cls, data: Any, where: str) -> GenderWords:
        """Word lists from parsed YAML ``{male: [...], female: [...]}`` (lower-cased)."""
        if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in ("male", "female")):
            raise AuditorError(f"{where} must map 'male' and 'female' to lists of words")
        return cls(*(frozenset(str(word).strip().lower() for word in data[key] if str(word).strip()) for key in ("male", "female")))

    def found(self, caption: str) -> list[str]:
        """The indicator words in ``caption``, in order of appearance (lower case)."""
        return self._pattern.findall(caption.lower())

    def label(self, caption: str) -> GenderLabel:
        """male, female, both or none, from the words alone."""
        words = set(self.found(caption))
        return combine(["male" if words & self.male else "none", "female" if words & self.female else "none"])


class FirstNames:
    """Genders of first names in a caption through ``gender-guesser`` (see the module docstring)."""

    #: What the record says was used to find names.
    method = "gender-guesser on capitalised name runs (heuristic; the paper used spaCy en_core_web_lg PERSON entities)"

    def __init__(self) -> None:
        try:
            import gender_guesser.detector as detector
        except ImportError as exc:
            raise AuditorError(
                "first-name labelling needs the gender-guesser package: pip install 'auditor[amplification]'"
            ) from exc
        self._detector = detector.Detector(case_sensitive=False)

    def genders(self, caption: str) -> list[str]:
        """``male``/``female`` for each name found, in order."""
        found = []
        for run in _capitalised_runs(caption, list(_WORD.finditer(caption))):
            for word in run:
                if len(word) == 1:
                    continue  # an initial
                guess = self._detector.get_gender(word)
                if guess != "unknown":
                    if guess in NAME_GENDERS:
                        found.append(NAME_GENDERS[guess])
                    break  # the first known token decides, as in the authors' code (androgynous: no label)
        return found


def _capitalised_runs(caption: str, words: Sequence[re.Match]) -> list[list[str]]:
    """Runs of at least two consecutive capitalised words (an initial may be followed by a full stop)."""
    runs: list[list[str]] = []
    current: list[str] = []
    previous_end = None
    for match in words:
        word = match.group()
        capitalised = word[0].isupper() and (len(word) == 1 or not word.isupper())
        if not capitalised:
            current, previous_end = _close(runs, current), None
            continue
        if current and previous_end is not None:
            gap = caption[previous_end : match.start()]
            joined = gap.isspace() or (len(current[-1]) == 1 and re.fullmatch(r"\.\s*", gap) is not None)
            if not joined:
                current = _close(runs, current)
        current.append(word)
        previous_end = match.end()
    _close(runs, current)
    return runs


def _close(runs: list[list[str]], current: list[str]) -> list[str]:
    if len(current) >= 2:
        runs.append(current)
    return []


class CaptionLabeller:
    """Labels captions by gender words and, when ``names`` is given, first names (authors' combination)."""

    def __init__(self, words: GenderWords | None = None, names: FirstNames | None = None):
        self.words = words or GenderWords.builtin()
        self.names = names

    @property
    def method(self) -> str:
        """What the labels are based on, for the record."""
        return "gender words" + (f" + first names ({self.names.method})" if self.names else "")

    def label(self, caption: str) -> GenderLabel:
        labels: list[str] = [self.words.label(caption)]
        if self.names is not None:
            labels += self.names.genders(caption)
        return combine(labels)
