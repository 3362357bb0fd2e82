"""The bias-amplification study's prompts: Table 1's templates filled with an occupation.

Both sides use them: the generated side prompts the model with them, and the training
side's nearest-neighbour selection ranks captions by their similarity to them.
"""

from __future__ import annotations

from string import Formatter

from auditor.core.errors import AuditorError
from auditor.core.text import single_spaced

#: Occupations starting with one of these letters take "an" (the authors' rule, lower case only).
_VOWELS = "aieou"


def article(occupation: str) -> str:
    """``an`` when the occupation starts with a lower-case vowel, else ``a``.

    The rule of the authors' ``generate_images.py``, kept so prompts match theirs: it gives
    "a CEO" (right) but also "an university professor" (wrong English). Pass a template
    without ``{article}`` to write articles yourself.
    """
    return "an" if occupation[:1] in _VOWELS else "a"


def builtin_templates() -> list[str]:
    """The paper's four templates (Table 1) from ``prompts/amplification/templates.yaml``; the first is the default."""
    from auditor.core.resources import read_prompt_yaml

    return [str(t) for t in read_prompt_yaml("amplification/templates.yaml")["templates"]]


def occupation_prompt(template: str, occupation: str) -> str:
    """``template`` with ``{occupation}`` and ``{article}`` filled in."""
    occupation = single_spaced(occupation)
    if not occupation:
        raise AuditorError("an occupation cannot be empty")
    only = f"the prompt template {template!r} may only use {{occupation}} and {{article}}"
    try:
        parsed = list(Formatter().parse(template))
    except ValueError as exc:  # an unmatched brace
        raise AuditorError(f"{only} ({exc})") from None
    fields = [(name, conversion, spec) for _, name, spec, conversion in parsed if name is not None]
    for name, conversion, spec in fields:  # nothing else: "{occupation.title}" would put a method's repr in the prompt
        if name not in ("occupation", "article") or conversion or spec:
            shown = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise AuditorError(f"{only}, as they are (not {{{shown}}})")
    if not any(name == "occupation" for name, _, _ in fields):
        raise AuditorError(f"the prompt template {template!r} has no {{occupation}} placeholder")
    return template.format(occupation=occupation, article=article(occupation))
