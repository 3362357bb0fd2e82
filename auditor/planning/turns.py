"""A chat model whose replies go through the content cache one turn at a time.

A plan is one conversation of 3 + retries requests, and the plan cache holds only whole
plans. Without this, a run stopped mid-conversation asks every turn again when it resumes.
It also cannot tell how many requests it made. Here each reply is cached as it arrives,
keyed on the conversation so far, so a resume replays the answered turns and asks only the
rest. ``before_request`` runs before every request that is not a replay, so a budget can
count each one before it is sent (or refuse it).

A conversation that ends without a valid plan is forgotten (:meth:`CachedChat.forget`): its
replies are a sample that failed, and asking again is how a user gets another one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from auditor.core.redaction import redact
from auditor.records import ChatMessage

if TYPE_CHECKING:  # pragma: no cover
    from auditor.core.cache import ContentCache
    from auditor.planning.llm import ChatModel

#: Content-cache stage of single chat replies.
STAGE = "chat-turn"


@dataclass(frozen=True)
class TurnCache:
    """Where a planner's replies are cached, and what runs before each request that leaves."""

    cache: ContentCache
    before_request: Callable[[], None] | None = None
    #: Replay only: the first turn the cache does not hold raises :class:`NotCached`; nothing is sent or forgotten.
    dry_run: bool = False

    def wrap(self, chat: ChatModel) -> CachedChat:
        """One conversation's chat (what it forgets is its own turns)."""
        return CachedChat(chat, self)


class NotCached(Exception):
    """A dry run reached a turn the cache does not hold, after replaying ``replayed`` turns."""

    def __init__(self, replayed: int):
        super().__init__(f"{replayed} turns replayed")
        self.replayed = replayed


class CachedChat:
    """A :class:`~auditor.planning.llm.ChatModel` that replays cached replies and caches new ones."""

    def __init__(self, chat: ChatModel, turns: TurnCache):
        from auditor.planning.registry import planner_fingerprint

        self.chat = chat
        self.turns = turns
        self.spec = chat.spec
        self.temperature = chat.temperature
        self.seed = chat.seed
        #: The model, its endpoint and the chain's templates: read and hashed once per conversation, not per turn.
        self._fingerprint = planner_fingerprint(chat.spec)
        #: The cache inputs of every turn this conversation was served, replayed or sent.
        self._served: list[dict] = []

    def complete(self, messages: Sequence[ChatMessage], *, json_mode: bool) -> str:
        fingerprint = self._fingerprint
        inputs = {
            "messages": [message.model_dump() for message in messages],
            "json_mode": json_mode,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        cache = self.turns.cache
        reply = cache.get_json(STAGE, fingerprint, inputs)
        if reply is None:
            if self.turns.dry_run:
                raise NotCached(len(self._served))
            if self.turns.before_request is not None:
                self.turns.before_request()
            # a server may echo the key back: it never reaches the cache
            reply = redact(self.chat.complete(messages, json_mode=json_mode))
            cache.put_json(STAGE, fingerprint, inputs, reply)
        self._served.append(inputs)
        return reply

    def forget(self) -> None:
        """Remove this conversation's replies from the cache, so the next attempt asks the LLM afresh."""
        if self.turns.dry_run:
            return
        self.turns.cache.discard(STAGE, self._fingerprint, self._served)
        self._served = []
