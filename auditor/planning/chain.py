"""The TIBET planning chain: three turns with an LLM, then bounded repair turns.

The chain is one conversation of three user turns (paper Appendix 8.1; the templates
are data in ``prompts/planning/tibet_chain.yaml``). The last reply is read with
:func:`~auditor.planning.extract.extract_axes` and held to the rules every plan obeys
(:mod:`auditor.planning.rules`). When that fails,
the problem goes back to the LLM in the same conversation and it answers again, at most
``retries`` times; then :class:`~auditor.core.errors.InvalidPlanError` carries the whole
transcript so the caller can save it. Errors from the backend carry the transcript so far.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError, InvalidPlanError
from auditor.core.redaction import redact
from auditor.core.resources import read_prompt_yaml
from auditor.planning.extract import PlanProblem, extract_axes
from auditor.planning.rules import PlanLimits, attach_transcript, finish_plan
from auditor.planning.turns import CachedChat, TurnCache
from auditor.records import AuditPlan, ChatMessage

if TYPE_CHECKING:  # pragma: no cover
    from auditor.planning.llm import ChatModel

CHAIN_FILE = "planning/tibet_chain.yaml"


@lru_cache(maxsize=1)
def chain_templates() -> dict:
    """``{"turns": [three user turns], "repair": template}`` with ``{prompt}``/``{error}`` placeholders."""
    return read_prompt_yaml(CHAIN_FILE)


def _fill(template: str, **values: str) -> str:
    # str.replace, not str.format: prompts and errors may contain braces.
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


class ChainPlanner:
    """The three-turn TIBET chain over any :class:`~auditor.planning.llm.ChatModel`."""

    def __init__(self, chat: ChatModel, turns: TurnCache | None = None):
        """``turns``: cache each reply as it arrives, so a conversation cut off is resumed, not asked again."""
        self.chat = chat
        self.turns = turns
        self.spec = chat.spec

    def plan(self, prompt: str, limits: PlanLimits) -> AuditPlan:
        templates = chain_templates()
        chat = self.chat if self.turns is None else self.turns.wrap(self.chat)  # this conversation's turns
        messages: list[ChatMessage] = []
        user_turns = templates["turns"]
        for index, turn in enumerate(user_turns):
            messages.append(ChatMessage(role="user", content=_fill(turn, prompt=prompt)))
            reply = self._ask(chat, messages, json_mode=index == len(user_turns) - 1)
        attempts = 1
        while True:
            try:
                return finish_plan(
                    prompt,
                    extract_axes(reply),
                    limits,
                    llm=self.spec,
                    transcript=messages,
                    attempts=attempts,
                    temperature=self.chat.temperature,
                    seed=self.chat.seed,
                )
            except PlanProblem as problem:
                if attempts > limits.retries:
                    if isinstance(chat, CachedChat):
                        chat.forget()  # another attempt should get new replies, not these again
                    replies = "reply" if attempts == 1 else "replies"
                    error = InvalidPlanError(
                        f"the LLM gave no valid plan in {attempts} {replies} to the JSON request "
                        f"(--llm-retries {limits.retries}): {problem}"
                    )
                    raise attach_transcript(error, messages) from None
                repair = _fill(templates["repair"], prompt=prompt, error=str(problem))
                messages.append(ChatMessage(role="user", content=repair))
                reply = self._ask(chat, messages, json_mode=True)
                attempts += 1

    @staticmethod
    def _ask(chat: ChatModel, messages: list[ChatMessage], *, json_mode: bool) -> str:
        try:
            reply = chat.complete(messages, json_mode=json_mode)
        except AuditorError as error:
            raise attach_transcript(error, messages)
        reply = redact(reply)  # a server may echo the key back: it never reaches the plan or the transcript
        messages.append(ChatMessage(role="assistant", content=reply))
        return reply
