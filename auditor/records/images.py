"""What the shared stages produce: images in prompt sets, and the VQA model's answers."""

from __future__ import annotations

from pydantic import Field

from auditor.records.record import Record


class GeneratedImage(Record):
    """One image of a prompt set."""

    index: int = Field(ge=0, description="Position i in the set; image i of every set shares seed i.")
    file: str = Field(description="Path of the image relative to the run folder.")
    seed: int | None = Field(default=None, description="Generation seed; None when the backend takes none.")
    sha256: str = Field(description="sha256 of the image file's bytes.")
    flagged_nsfw: bool = Field(
        default=False, description="The safety checker blacked the image out; it is left out of the concepts."
    )


class PromptSet(Record):
    """The images of one prompt: the initial prompt or one counterfactual."""

    prompt_id: str = Field(description="'initial' or '<axis>/<k>' for the k-th counterfactual of an axis.")
    prompt: str = Field(description="The prompt text given to the model.")
    axis: str | None = Field(default=None, description="Axis of a counterfactual; None for the initial prompt.")
    images: list[GeneratedImage] = Field(default_factory=list, description="Images in seed order.")


class ImageAnswers(Record):
    """What the VQA model said about one image."""

    image_index: int = Field(ge=0, description="Index of the image in its prompt set.")
    answers: dict[str, str] = Field(description="Axis name -> answer to that axis's question.")
    caption: str | None = Field(default=None, description="Answer to the caption question.")
    image_sha256: str | None = Field(
        default=None,
        description="sha256 of the image bytes the answers are about: a resume without the cache reuses them only "
        "for an image with these bytes (None in records written before it was kept: never reused).",
    )
