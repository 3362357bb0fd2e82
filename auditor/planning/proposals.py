"""What a planner proposes before the rules check it: axes with their counterfactuals."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["societal", "incidental"]


class PlanProblem(ValueError):
    """Why a reply gives no valid plan; the message is sent back to the LLM, so it says what to fix."""


@dataclass
class ProposedAxis:
    """An axis as the reply gave it, before names are normalised and the plan is validated."""

    name: str
    counterfactuals: list[str] = field(default_factory=list)
    kind: Kind | None = None


def snake_case(text: str) -> str:
    """``'Socioeconomic Status'`` -> ``'socioeconomic_status'``; ``'Race/Ethnicity'`` -> ``'race_ethnicity'``."""
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")
