"""The generated side (G) of the amplification study: the prompts' images, and each image set's share of women.

Apart from the run (:mod:`auditor.studies.amplification`) because it is one half of the
comparison: which prompt set holds each occupation's images for each template, and how
the face and gender stages' verdicts on those images become G with its interval. The
training side is :mod:`auditor.studies.amplification_training`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.corpora.prompts import occupation_prompt
from auditor.executors.generation import PromptRequest
from auditor.records import AmplificationConfig, GeneratedSide, ImageGender, PromptSet
from auditor.scoring.amplification import image_counts, share
from auditor.studies.occupations import occupation_slug

if TYPE_CHECKING:  # pragma: no cover
    from auditor.studies.amplification import AmplificationRun


def prompt_id(occupation: str, template: int) -> str:
    """The prompt set of an occupation's images for template number ``template`` (1-based)."""
    return f"{occupation_slug(occupation)}/p{template}"


def generation_requests(config: AmplificationConfig) -> list[PromptRequest]:
    """One prompt set per occupation and template, in the config's order."""
    return [
        PromptRequest(prompt_id(occupation, k), occupation_prompt(template, occupation))
        for occupation in config.occupations
        for k, template in enumerate(config.templates, start=1)
    ]


def generated_sides(study: AmplificationRun) -> list[GeneratedSide]:
    """G of every occupation and template, from the generated images' face verdicts and gender decisions."""
    config = study.record.config
    sets = {prompt_set.prompt_id: prompt_set for prompt_set in study.record.prompt_sets}
    return [
        _generated_side(study, occupation, k, sets[prompt_id(occupation, k)])
        for occupation in config.occupations
        for k in range(1, len(config.templates) + 1)
    ]


def _generated_side(study: AmplificationRun, occupation: str, template: int, prompt_set: PromptSet) -> GeneratedSide:
    config = study.record.config
    images = []
    for image in prompt_set.images:
        verdict = None if image.flagged_nsfw else study.verdict(image.sha256)
        if image.flagged_nsfw or verdict is None:
            images.append(ImageGender(index=image.index, face=None, faces=0, p_woman=None, gender=None))
            continue
        images.append(
            ImageGender(
                index=image.index,
                face=verdict,
                faces=len(study.boxes[image.sha256]),
                p_woman=study.p_woman.get(image.sha256),
                gender=study.decision(image.sha256),
            )
        )
    counts = image_counts(
        [("flagged_nsfw" if i.flagged_nsfw else g.face, g.gender) for i, g in zip(prompt_set.images, images)]
    )
    return GeneratedSide(
        occupation=occupation,
        template=template,
        prompt_id=prompt_set.prompt_id,
        prompt=prompt_set.prompt,
        images=images,
        counts=counts,
        share=share(counts.woman, counts.man + counts.woman, config.ci_level),
    )
