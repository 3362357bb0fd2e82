"""The offline planner: fixed axes chosen by what WordNet says the prompt depicts.

No network and no model: the baseline of static-axis methods (T2IAT, DALL-Eval) and the
fallback when no LLM is configured. The axes, their values and where the values go are
data (``prompts/planning/axis_library.yaml``, whose header explains the format); this
module finds the prompt's head noun and its category with WordNet and edits the prompt
one concept at a time: "a photo of a pharmacist" -> "a photo of a female pharmacist",
"a photo of an elderly pharmacist". The same prompt always gives the same plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from auditor.core.errors import AuditorError, StartAgainError
from auditor.core.registry import Spec
from auditor.core.resources import read_prompt_yaml
from auditor.planning.proposals import PlanProblem, ProposedAxis, snake_case
from auditor.planning.rules import PlanLimits, attach_transcript, finish_plan
from auditor.prompting.articles import fix_article, indefinite_article
from auditor.records import AuditPlan, ChatMessage

if TYPE_CHECKING:  # pragma: no cover
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

LIBRARY_FILE = "planning/axis_library.yaml"
#: Part of the offline planner's cache key beside its axis library: change it when what its plans hold changes
#: (2: the notes on a prompt without a noun it knows), so a cached plan is not served without it.
OFFLINE_PLANNER_VERSION = 2
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
#: A word that is not a markup tag's name (the "b" of "<b>" or "</b>").
_TEXT_WORD = re.compile(r"(?<![</\w])[A-Za-z][A-Za-z'-]*")


@dataclass
class Word:
    """A word of the prompt, with its WordNet noun lemma and category when it is a noun."""

    text: str
    start: int
    end: int
    lemma: str | None = None
    category: str | None = None


@dataclass
class Reading:
    """What the prompt depicts: its words, the head noun and the run of nouns the head ends."""

    prompt: str
    words: list[Word]
    head: Word | None
    run_start: int
    run_end: int
    category: str

    def describe(self) -> str:
        if self.head is None:
            return "no noun found, so the prompt is read as abstract"
        article = indefinite_article(self.category)
        return f"head noun {self.head.text!r} (WordNet lemma {self.head.lemma!r}) is {article} {self.category}"


@lru_cache(maxsize=1)
def axis_library() -> dict[str, Any]:
    return read_prompt_yaml(LIBRARY_FILE)


class OfflinePlanner:
    """Deterministic WordNet planner; the ``offline`` spec.

    ``axes`` (``--axes``) fixes which of the library's axes to write, in that order, instead of
    every axis of the prompt's category; an axis the library does not apply to that category
    (gender for "a photo of a kettle"), one with fewer than two counterfactuals or one over
    ``--max-axes`` is left out, and the plan's ``dropped_axes`` says why, for the reports to show.
    """

    spec = "offline"

    def __init__(self, axes: Sequence[str] | None = None):
        self.axes = check_axes(axes) if axes is not None else None

    def plan(self, prompt: str, limits: PlanLimits) -> AuditPlan:
        from auditor.core.langdata import load_wordnet

        wordnet = load_wordnet()
        library = axis_library()
        reading = read_prompt(prompt, wordnet, library)
        category = next(c for c in library["categories"] if c["name"] == reading.category)
        names = category["axes"] if self.axes is None else [name for name in self.axes if name in category["axes"]]
        proposed, skipped = [], []
        for name in names:
            axis = library["axes"][name]
            counterfactuals = _distinct(prompt, _counterfactuals(reading, axis, wordnet))
            if len(counterfactuals) >= 2:
                proposed.append(ProposedAxis(name, counterfactuals, axis.get("kind")))
            else:
                skipped.append(name)
        unfit = [name for name in self.axes or [] if name not in category["axes"]]
        capped = [axis.name for axis in proposed[limits.max_axes :]] if limits.max_axes else []
        note = (
            f"Offline WordNet planner (no LLM): {reading.describe()}; its axes in "
            f"prompts/{LIBRARY_FILE}: {', '.join(category['axes'])}."
            + (f" Asked for (--axes): {', '.join(self.axes)}." if self.axes is not None else "")
            + (f" Not applied to {reading.category} prompts: {', '.join(unfit)}." if unfit else "")
            + (f" Skipped (fewer than two counterfactuals): {', '.join(skipped)}." if skipped else "")
            + (f" Over --max-axes {limits.max_axes}: {', '.join(capped)}." if capped else "")
        )
        reply = json.dumps({axis.name: axis.counterfactuals for axis in proposed}, indent=2, ensure_ascii=False)
        transcript = [ChatMessage(role="system", content=note), ChatMessage(role="assistant", content=reply)]
        try:
            plan = finish_plan(prompt, proposed, limits, llm=self.spec, transcript=transcript)
        except PlanProblem as problem:  # e.g. a prompt WordNet cannot read and that has nothing to vary
            why = f"the axis library applies {', '.join(unfit)} to other prompts; {reading.describe()}"
            found = why if unfit and not proposed else problem
            # the same prompt and axes always give the same answer: bad input, and a resume would stop the same way
            error = StartAgainError(f"the offline planner found no plan: {found}; name other --axes, or plan with --llm")
            raise attach_transcript(error, transcript) from None
        if reading.head is None:  # said where the person looks: otherwise only the transcript says why
            plan.notes = [
                (
                    f"The offline planner found no noun it knows in '{prompt}' (it reads English words, through "
                    "WordNet), so it planned the axes of abstract prompts; plan with --llm for a prompt in another "
                    "language"
                )
            ]
        if self.axes is None:  # the planner chose the axes: none was asked for, so none was dropped
            return plan
        why = {name: f"the axis library does not apply it to {reading.category} prompts" for name in unfit}
        why |= {name: "fewer than two counterfactuals could be written for this prompt" for name in skipped}
        why |= {name: f"over --max-axes {limits.max_axes}" for name in capped}
        plan.dropped_axes = {name: why[name] for name in self.axes if name in why}
        return plan


def check_axes(names: Sequence[str]) -> list[str]:
    """``--axes`` names as the library spells them (snake_case, repeats dropped); unknown ones are one error."""
    library = axis_library()["axes"]
    checked = list(dict.fromkeys(snake_case(name) for name in names if name.strip()))
    if not checked:
        raise AuditorError("--axes names no axis: give library axes such as gender,age")
    unknown = [name for name in checked if name not in library]
    if unknown:
        raise AuditorError(
            f"unknown axis {', '.join(map(repr, unknown))} in --axes: the axis library (prompts/{LIBRARY_FILE}) "
            f"has {', '.join(library)}"
        )
    return checked


def load(spec: Spec, **_settings: Any) -> OfflinePlanner:
    """Registry loader; temperature and seed mean nothing to a deterministic planner."""
    if spec.target:
        raise AuditorError(f"the offline planner takes no model: use --llm offline (got {str(spec)!r})")
    return OfflinePlanner()


# --------------------------------------------------------------------------- reading the prompt


def read_prompt(prompt: str, wordnet: WordNetCorpusReader, library: dict[str, Any]) -> Reading:
    """Find the nouns of ``prompt`` and its head: the noun of the highest category, last of its noun run."""
    from auditor.core.langdata import english_stopwords

    stopwords = english_stopwords()
    framing = set(library["framing_nouns"])
    words = [Word(m.group(0), m.start(), m.end()) for m in _WORD.finditer(prompt)]
    words = _merge_compounds(words, prompt, wordnet, stopwords)
    for word in words:
        text = word.text.lower().replace(" ", "_")
        if text in stopwords:
            continue
        lemma = wordnet.morphy(text, "n")
        senses = wordnet.synsets(text, pos="n")
        if lemma is None or not senses or senses[0].lexname() == "noun.quantity":
            continue
        word.lemma = lemma
        if lemma not in framing:
            word.category = _category(lemma, senses, library)
    priority = [c["name"] for c in library["categories"]]
    nouns = [w for w in words if w.category]
    if not nouns:
        return Reading(prompt, words, None, len(prompt), len(prompt), "abstract")
    best = min(priority.index(w.category) for w in nouns)
    runs = _noun_runs(words)
    run = next(r for r in runs if any(w.category == priority[best] for w in r))
    head = [w for w in run if w.category == priority[best]][-1]
    return Reading(prompt, words, head, run[0].start, run[-1].end, priority[best])


def _merge_compounds(
    words: list[Word], prompt: str, wordnet: WordNetCorpusReader, stopwords: frozenset[str]
) -> list[Word]:
    """Join two adjacent words that WordNet knows as one noun ("police officer", "ice cream")."""
    merged: list[Word] = []
    i = 0
    while i < len(words):
        first = words[i]
        if (
            i + 1 < len(words)
            and prompt[first.end : words[i + 1].start] == " "
            and not {first.text.lower(), words[i + 1].text.lower()} & stopwords
        ):
            pair = f"{first.text}_{words[i + 1].text}".lower()
            if wordnet.synsets(pair, pos="n"):
                merged.append(Word(prompt[first.start : words[i + 1].end], first.start, words[i + 1].end))
                i += 2
                continue
        merged.append(first)
        i += 1
    return merged


def _category(lemma: str, senses: list, library: dict[str, Any]) -> str:
    """Category of a noun: an override, else the first concrete category among its two main senses."""
    overrides = library.get("category_overrides", {})
    if lemma in overrides:
        return overrides[lemma]
    by_lexname = {lex: c["name"] for c in library["categories"] for lex in c["lexnames"]}
    for sense in senses[:2]:
        if sense.lexname() in by_lexname:
            return by_lexname[sense.lexname()]
    return "abstract"


def _noun_runs(words: list[Word]) -> list[list[Word]]:
    """Maximal runs of adjacent nouns (framing nouns break runs): "Indian astronauts", "black cat"."""
    runs: list[list[Word]] = []
    for previous, word in zip([None, *words], words):
        if not word.category:
            continue
        if previous is not None and previous.category and runs and runs[-1][-1] is previous:
            runs[-1].append(word)
        else:
            runs.append([word])
    return runs


# --------------------------------------------------------------------------- writing counterfactuals


def _counterfactuals(reading: Reading, axis: dict[str, Any], wordnet: WordNetCorpusReader) -> list[str]:
    """Counterfactuals of one axis, from the first rule that applies: swaps, marks, place nouns, forms."""
    prompt = reading.prompt
    scope = (reading.run_start, reading.run_end) if axis.get("scope") == "head" else (0, len(prompt))
    form = _form(axis, reading.category, reading.head is None)
    for group in axis.get("swaps", []):
        for member in group:
            found = _find(prompt, member, scope)
            if found:
                return [_replace(prompt, *found, other) for other in group if other.lower() != member.lower()]
    for mark in axis.get("marks", []):
        found = _find(prompt, mark, scope)
        if found and form:
            return [_replace(prompt, *found, value) for value in form["values"] if value.lower() != mark.lower()]
    if axis.get("place_nouns"):
        place = next((w for w in reading.words if w.category == "place"), None)
        if place is not None:
            start = _with_article(prompt, place.start)
            return [_replace(prompt, start, place.end, value) for value in axis["place_nouns"]]
    if "values_by_head" in axis:
        return _breeds(reading, axis, wordnet)
    if form is None:
        return []
    if form["place"] == "frame":
        return _reframe(reading, form, wordnet)
    return [_place(reading, form["place"], value) for value in form["values"]]


def _form(axis: dict[str, Any], category: str, no_head: bool) -> dict[str, Any] | None:
    forms = axis.get("forms", {})
    if no_head and "none" in forms:
        return forms["none"]
    return forms.get(category) or forms.get("default")


def _breeds(reading: Reading, axis: dict[str, Any], wordnet: WordNetCorpusReader) -> list[str]:
    """Named breeds before the head; for other animals, WordNet hyponyms replace the head noun."""
    head = reading.head
    if head is None:
        return []
    known = axis["values_by_head"].get(head.lemma)
    if known:
        return [_insert(reading.prompt, reading.run_start, value) for value in known]
    hyponyms = sorted(
        {h.lemmas()[0].name().replace("_", " ") for h in wordnet.synsets(head.lemma, pos="n")[0].hyponyms()}
    )
    return [_replace(reading.prompt, head.start, head.end, name) for name in hyponyms[: axis.get("hyponyms", 4)]]


def _reframe(reading: Reading, form: dict[str, Any], wordnet: WordNetCorpusReader) -> list[str]:
    """Swap the framing noun ("a photo of" -> "an oil painting of") for each value that is not a
    synonym of it; without a framing noun, append the form's ``append`` phrases instead."""
    framing = set(axis_library()["framing_nouns"])
    frame = next((w for w in reading.words if w.lemma in framing), None)
    if frame is None:
        return [_append(reading.prompt, phrase) for phrase in form.get("append", [])]
    return [
        _replace(reading.prompt, frame.start, frame.end, value)
        for value in form["values"]
        if not _synonyms(frame.lemma, value.split()[-1], wordnet)
    ]


def _place(reading: Reading, place: str, value: str) -> str:
    """``value`` added before the head's noun run, after the head, or at the end."""
    prompt, head = reading.prompt, reading.head
    if head is None or place == "end":
        return _append(prompt, value)
    if place == "before":
        return _insert(prompt, reading.run_start, value)
    return prompt[: head.end] + " " + value + prompt[head.end :]


def _synonyms(first: str, second: str, wordnet: WordNetCorpusReader) -> bool:
    """Whether two nouns share a WordNet sense ("photo"/"photograph", "picture"/"painting")."""
    return first == second or bool(set(wordnet.synsets(first, pos="n")) & set(wordnet.synsets(second, pos="n")))


# --------------------------------------------------------------------------- editing text


def _find(prompt: str, phrase: str, scope: tuple[int, int]) -> tuple[int, int] | None:
    pattern = re.compile(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", re.IGNORECASE)
    match = pattern.search(prompt, *scope)
    return (match.start(), match.end()) if match else None


def _with_article(prompt: str, start: int) -> int:
    """Move ``start`` back over an article right before it ("in the city" -> "the city")."""
    match = re.search(r"(?i)(?<![\w-])(a|an|the)\s+$", prompt[:start])
    return match.start() if match else start


def _replace(prompt: str, start: int, end: int, value: str) -> str:
    """``prompt`` with ``[start, end)`` replaced by ``value``; capitalised where it opens the prompt (markup
    attached before it aside: ``<b>Man</b>`` becomes ``<b>Woman</b>``), article fixed."""
    if _attached_start(prompt, start) == 0 and prompt[start : start + 1].isupper():
        value = value[0].upper() + value[1:]
    return fix_article(prompt[:start], value) + prompt[end:]


def _attached_start(prompt: str, start: int) -> int:
    """Where the word at ``start`` begins with what is attached to it: brackets, quotes and whole markup tags
    (``<b class="x">``, whose spaces are the tag's) right before it."""
    while start > 0 and not prompt[start - 1].isspace():
        tag = prompt.rfind("<", 0, start - 1) if prompt[start - 1] == ">" else -1
        start = tag if tag >= 0 else start - 1
    return start


def _insert(prompt: str, start: int, value: str) -> str:
    """``prompt`` with ``value`` put before the word at ``start``, in front of whatever is attached to that word
    (``<b>nurse``, ``[elderly]``, ``"nurse``): a new word never lands inside markup or brackets."""
    start = _attached_start(prompt, start)
    rest = prompt[start:]
    first = _TEXT_WORD.search(rest)  # the word itself, after any markup attached to it ("<b>Nurse")
    attached = first is not None and not any(c.isspace() for c in rest[: first.start()])
    if start == 0 and attached and first.group(0)[0].isupper():
        value = value[0].upper() + value[1:]
        if first.group(0)[1:].islower():  # "Nurse" becomes "Male nurse"; "NASA" and "McDonald" keep theirs
            rest = rest[: first.start()] + first.group(0)[0].lower() + rest[first.start() + 1 :]
    return fix_article(prompt[:start], value + " " + rest)


def _append(prompt: str, value: str) -> str:
    body = prompt.rstrip()
    stripped = body.rstrip(".!?")
    return f"{stripped} {value}{body[len(stripped):]}"


def _distinct(prompt: str, counterfactuals: list[str]) -> list[str]:
    seen = {prompt.casefold()}
    kept = []
    for text in counterfactuals:
        if text.casefold() not in seen:
            seen.add(text.casefold())
            kept.append(text)
    return kept
