"""Which VQA question probes which bias axis (TIBET Table 4, kept in ``prompts/vqa_questions.yaml``).

The LLM names axes freely ("Socioeconomic Status", "racial_bias", "Gender Bias"), so an
axis is matched on its name's words, with "bias"/"biases" left out; the first word that
has a question in the table wins. Other axes get the paper's generic question.
"""

from __future__ import annotations

import re
from functools import lru_cache

from auditor.core.resources import read_prompt_yaml

QUESTIONS_FILE = "vqa_questions.yaml"
_IGNORED_WORDS = frozenset({"bias", "biases"})


@lru_cache(maxsize=1)
def _table() -> dict:
    return read_prompt_yaml(QUESTIONS_FILE)


def axis_words(axis: str) -> list[str]:
    """Lower-case words of an axis name without "bias"/"biases": ``'Racial_Bias'`` -> ``['racial']``."""
    return [word for word in re.split(r"[^0-9a-z]+", axis.lower()) if word and word not in _IGNORED_WORDS]


def question_for_axis(axis: str) -> str:
    """The VQA question asked of every image for ``axis``."""
    table = _table()
    questions: dict[str, str] = table["questions"]
    words = axis_words(axis)
    for word in words:
        for candidate in (word, word[:-1] if word.endswith("s") else None):
            if candidate and candidate in questions:
                return questions[candidate]
    label = " ".join(words) or axis.strip()
    return table["template"].format(axis=label)


def caption_question() -> str:
    """The caption question asked of every image ("Describe the image.")."""
    return _table()["caption"]
