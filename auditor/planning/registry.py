"""Which planner serves which ``--llm`` spec, and what a cached plan is keyed on.

- ``openai:<model>``: the TIBET chain over the openai SDK (``OPENAI_API_KEY``,
  ``OPENAI_BASE_URL`` for any OpenAI-compatible server);
- ``langchain:<provider>:<model>``: the chain over any chat model of langchain's ``init_chat_model``;
- ``offline``: the deterministic WordNet planner (:mod:`auditor.planning.offline`).

Like the generation and perception registries, backends are imported only when a plan is
made, so checking a spec or keying the cache needs no SDK and no API key.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint, text_fingerprint
from auditor.core.openai_api import configured_base_url
from auditor.core.registry import Registry, Spec, parse_spec
from auditor.core.resources import read_prompt_text
from auditor.planning.chain import CHAIN_FILE
from auditor.planning.offline import LIBRARY_FILE, OFFLINE_PLANNER_VERSION
from auditor.planning.questions import QUESTIONS_FILE
from auditor.planning.rules import PlanLimits
from auditor.records import AuditPlan

if TYPE_CHECKING:  # pragma: no cover
    from auditor.planning.llm import ChatModel
    from auditor.planning.turns import TurnCache


class Planner(Protocol):
    """What the ``--llm`` registry's loaders return."""

    spec: str

    def plan(self, prompt: str, limits: PlanLimits) -> AuditPlan:
        """The validated plan for ``prompt``; InvalidPlanError (with ``.transcript``) when there is none."""
        ...


def load_openai(spec: Spec, *, turns: TurnCache | None = None, **settings: Any) -> Planner:
    """Registry loader of ``openai:<model>``: the TIBET chain over the openai SDK."""
    from auditor.planning.chain import ChainPlanner
    from auditor.planning.llm import OpenAIChat

    return ChainPlanner(OpenAIChat(spec, **settings), turns)


def load_langchain(spec: Spec, *, turns: TurnCache | None = None, **settings: Any) -> Planner:
    """Registry loader of ``langchain:<provider>:<model>``: the TIBET chain over a langchain chat model."""
    from auditor.planning.chain import ChainPlanner
    from auditor.planning.llm import LangChainChat

    return ChainPlanner(LangChainChat(spec, **settings), turns)


LLM_BACKENDS = Registry("LLM", "--llm")
LLM_BACKENDS.register("openai", "auditor.planning.registry:load_openai")
LLM_BACKENDS.register("langchain", "auditor.planning.registry:load_langchain")
LLM_BACKENDS.register("offline", "auditor.planning.offline:load", bare=True)


def load_chat(llm: str, **settings: Any) -> ChatModel:
    """The chat model an ``openai:``/``langchain:`` spec names (e.g. for the explore proposer); not ``offline``."""
    spec = parse_spec(check_llm_spec(llm))
    if spec.prefix == "offline":
        raise AuditorError("the offline planner has no chat model: use --llm openai:<model> or langchain:<provider>:<model>")
    from auditor.planning.llm import LangChainChat, OpenAIChat

    return (OpenAIChat if spec.prefix == "openai" else LangChainChat)(spec, **settings)


def check_llm_spec(text: str, temperature: float | None = None, seed: int | None = None) -> str:
    """Validate an ``--llm`` spec without importing any SDK; returns it normalised (``prefix:target``).

    ``temperature`` and ``seed`` (``--temperature``, ``--llm-seed``) are refused with the offline planner:
    it samples nothing, so a record saying they were sent would be false, and a user who set them
    (perhaps expecting the LLM that a missing ``OPENAI_API_KEY`` turned off) should hear so.
    """
    try:
        spec = LLM_BACKENDS.check(text)
    except AuditorError:
        raise AuditorError(
            f"unknown --llm {text.strip()!r}: use openai:<model>, langchain:<provider>:<model> or offline"
        ) from None
    if spec.prefix == "openai" and not spec.target:
        raise AuditorError("--llm openai needs a model: openai:<model>, e.g. openai:gpt-4o-mini")
    if spec.prefix == "langchain":
        provider, _, model = spec.target.partition(":")
        if not provider.strip() or not model.strip():
            raise AuditorError(
                "--llm langchain needs a provider and a model: langchain:<provider>:<model>, "
                "e.g. langchain:anthropic:claude-3-5-haiku-latest"
            )
    if spec.prefix == "offline" and spec.target:
        raise AuditorError(f"the offline planner takes no model: use --llm offline (got {text.strip()!r})")
    sampling = [name for name, value in (("--temperature", temperature), ("--llm-seed", seed)) if value is not None]
    if spec.prefix == "offline" and sampling:
        raise AuditorError(
            f"{' and '.join(sampling)} {'set' if len(sampling) > 1 else 'sets'} how an LLM samples, but the planner "
            "is the offline one, which samples "
            "nothing: choose an LLM with --llm (openai:<model> needs OPENAI_API_KEY) or leave them out"
        )
    return str(spec)


def planner_fingerprint(llm: str) -> str:
    """What a cached plan is keyed on besides the request: the planner, its data and where it runs.

    The LLM chain's templates, or the offline planner's axis library, and the VQA question
    table are hashed, and an LLM's endpoint (base URL) is included, so a changed template
    or another server never returns an old plan. Needs no API key and imports no SDK.
    """
    spec = parse_spec(check_llm_spec(llm))
    data = [QUESTIONS_FILE, LIBRARY_FILE if spec.prefix == "offline" else CHAIN_FILE]
    return settings_fingerprint(
        None,
        planner=str(spec),
        data=text_fingerprint(*(read_prompt_text(name) for name in data)),
        endpoint=_endpoint(spec.prefix, spec.target),
        **({"offline_planner": OFFLINE_PLANNER_VERSION} if spec.prefix == "offline" else {}),
    )


#: Words of an environment variable's name that say where a provider's SDK sends requests.
_ENDPOINT_WORDS = ("URL", "BASE", "HOST", "ENDPOINT")


def _endpoint(prefix: str, target: str) -> str | None:
    """Where the planner's requests go, as far as the environment tells without importing any SDK.

    OpenAI: the base URL the client will use (langchain-openai prefers ``OPENAI_API_BASE``;
    the openai SDK reads only ``OPENAI_BASE_URL``). Another langchain provider: its default,
    with every ``<PROVIDER>_...URL/BASE/HOST/ENDPOINT`` variable that is set (e.g.
    ``ANTHROPIC_BASE_URL``, ``OLLAMA_HOST``), so two servers never share cached replies.
    """
    if prefix == "offline":
        return None
    provider = target.partition(":")[0] if prefix == "langchain" else prefix
    if provider == "openai":
        return (prefix == "langchain" and os.environ.get("OPENAI_API_BASE")) or configured_base_url()
    variables = sorted(
        f"{name}={value}"
        for name, value in os.environ.items()
        if value and name.startswith(f"{provider.upper()}_") and any(word in name for word in _ENDPOINT_WORDS)
    )
    return f"{provider} ({', '.join(variables) or 'provider default'})"
