"""The LLM proposer of ``auditor explore``: candidate prompts from a topic, seeds and the leaderboard.

FLIRT-style in-context search (Mehrabi et al. 2023): one request per round with the
templates of ``prompts/explore/proposer.yaml``; round 1 asks for prompts about the topic or
like the seed prompts, later rounds show the current leaderboard (prompt, axis, score and
interval) and ask for mutations of the strongest (``parent``: the id changed) and new
directions. Replies are read like the planner's: the first JSON value that holds prompts,
whatever prose or fences surround it. Every reply goes through the content cache (keyed
on the model, its endpoint, the templates and the exact request), so a resumed exploration
asks nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from auditor.core.cache import ContentCache
from auditor.core.errors import BackendError
from auditor.core.fingerprint import settings_fingerprint, text_fingerprint
from auditor.core.redaction import redact
from auditor.core.resources import read_prompt_text, read_prompt_yaml
from auditor.core.text import single_spaced
from auditor.records import ChatMessage

PROPOSER_FILE = "explore/proposer.yaml"
#: Content-cache stage of proposer replies.
STAGE = "propose"
_PROMPT_FIELDS = ("prompt", "text", "candidate", "content")
_PARENT_FIELDS = ("parent", "parent_id", "mutates", "from")


@lru_cache(maxsize=1)
def proposer_templates() -> dict[str, str]:
    """``system``, ``first`` and ``next`` templates with ``{count}``/``{topic}``/... placeholders."""
    return read_prompt_yaml(PROPOSER_FILE)


def _fill(template: str, **values: str) -> str:
    # str.replace, not str.format: prompts and leaderboards may contain braces.
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


@dataclass(frozen=True)
class Proposed:
    """A prompt as the LLM proposed it, with the candidate it says it mutates."""

    prompt: str
    parent: str | None


@dataclass(frozen=True)
class ProposerRequest:
    """What one round asks: how many prompts, about what, and what it knows so far."""

    count: int
    topic: str | None
    seeds: Sequence[str]
    axes: Sequence[str]
    #: One line per arm: id, prompt, axis, score and interval; empty in round 1.
    leaderboard: Sequence[str] = ()
    #: Every prompt proposed so far.
    earlier: Sequence[str] = ()

    def messages(self) -> list[ChatMessage]:
        templates = proposer_templates()
        about = []
        if self.topic:
            about.append(f"The prompts are about: {self.topic}.")
        if self.seeds:
            about.append("Start from prompts like these: " + "; ".join(f'"{seed}"' for seed in self.seeds) + ".")
        values = {
            "count": str(self.count),
            "topic": " ".join(about),
            "axes": ", ".join(self.axes) if self.axes else "gender, age, ethnicity and other social attributes",
            "leaderboard": "\n".join(self.leaderboard) or "(nothing scored yet)",
            "earlier": "; ".join(f'"{prompt}"' for prompt in self.earlier) or "(none)",
        }
        turn = templates["next"] if self.leaderboard else templates["first"]
        return [
            ChatMessage(role="system", content=templates["system"]),
            ChatMessage(role="user", content=_fill(turn, **values)),
        ]


def proposer_fingerprint(llm: str) -> str:
    """What a cached reply is keyed on besides the request: the model, its endpoint, the templates."""
    from auditor.planning.registry import planner_fingerprint

    return settings_fingerprint(planner_fingerprint(llm), templates=text_fingerprint(read_prompt_text(PROPOSER_FILE)))


class LLMProposer:
    """Asks a chat model for candidate prompts, through the content cache."""

    def __init__(self, llm: str, cache: ContentCache, *, temperature: float | None = None, seed: int | None = None):
        self.llm = llm
        self.cache = cache
        self.temperature = temperature
        self.seed = seed
        self._chat: Any = None

    def is_cached(self, request: ProposerRequest) -> bool:
        """Whether this request's reply is cached (it then costs no LLM call)."""
        return self.cache.contains(STAGE, proposer_fingerprint(self.llm), self._inputs(request))

    def propose(self, request: ProposerRequest, known: Sequence[str]) -> tuple[list[Proposed], list[ChatMessage]]:
        """The proposals (parents outside ``known`` candidate ids dropped) and the conversation."""
        messages = request.messages()
        fingerprint = proposer_fingerprint(self.llm)
        cached = self.cache.get_json(STAGE, fingerprint, self._inputs(request))
        reply = cached if cached is not None else redact(self._chat_model().complete(messages, json_mode=True))
        proposed = read_proposals(reply, set(known))  # raises on an unusable reply, before it is cached
        if cached is None:
            self.cache.put_json(STAGE, fingerprint, self._inputs(request), reply)
        conversation = [*messages, ChatMessage(role="assistant", content=reply)]
        return proposed[: request.count], conversation

    def _inputs(self, request: ProposerRequest) -> dict[str, Any]:
        return {
            "messages": [message.model_dump() for message in request.messages()],
            "temperature": self.temperature,
            "seed": self.seed,
        }

    def _chat_model(self) -> Any:
        if self._chat is None:
            from auditor.planning.registry import load_chat

            self._chat = load_chat(self.llm, temperature=self.temperature, seed=self.seed)
        return self._chat


def read_proposals(reply: str, known: set[str]) -> list[Proposed]:
    """Prompts in a reply: ``{"prompts": [...]}`` or a bare list, of strings or ``{prompt, parent}`` objects.

    Blank and repeated prompts are dropped; a parent that is not a ``known`` candidate id is
    read as none. A reply without any prompt is an error (one line).
    """
    from auditor.planning.extract import json_values

    for value in json_values(reply):
        items = _items(value)
        if items:
            found: dict[str, Proposed] = {}
            for item in items:
                proposed = _proposed(item, known)
                if proposed is not None and proposed.prompt.casefold() not in found:
                    found[proposed.prompt.casefold()] = proposed
            if found:
                return list(found.values())
    raise BackendError(
        f'the LLM\'s reply held no prompts (expected JSON with a "prompts" list): {reply[:200]!r}; it was not kept, '
        "so --resume asks again"
    )


def _items(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, list) and str(key).lower() in ("prompts", "candidates", "items", "results"):
                return inner
        lists = [inner for inner in value.values() if isinstance(inner, list)]
        return lists[0] if len(lists) == 1 else []
    return []


def _proposed(item: Any, known: set[str]) -> Proposed | None:
    if isinstance(item, str):
        text, parent = item, None
    elif isinstance(item, dict):
        text = next((item[f] for f in _PROMPT_FIELDS if isinstance(item.get(f), str)), "")
        parent = next((item[f] for f in _PARENT_FIELDS if isinstance(item.get(f), str)), None)
    else:
        return None
    text = single_spaced(text)
    if not text:
        return None
    return Proposed(text, parent.strip() if parent and parent.strip() in known else None)
