"""VQA backends on transformers vision-language models: BLIP-2, BLIP, InstructBLIP, LLaVA-style.

``answer(images, questions)`` asks every question of every image with short greedy
answers. The expensive image side runs once per image: for BLIP-2 the vision encoder
and the Q-Former (its output does not depend on the question), for BLIP and
InstructBLIP the vision encoder (their Q-Former/text encoder reads the question). The
(image, question) pairs then go through the language side ``batch_size`` at a time.
Sequences are left-padded with masked positions so a pair's answer does not depend on
which other pairs share its batch. Pairs are batched in order of prompt length (the pairs
of one question together), which keeps the padding short, and a row stops decoding as
soon as its answer's first line is complete (only that line is kept, see
:func:`~auditor.perception.base.first_line`), or at its end-of-sequence token; a batch
ends when all of its rows have. Neither changes an answer.

The generic ``hf:`` path (``AutoModelForImageTextToText`` + the processor's chat
template) cannot split image encoding from the prompt, since those models splice image
features into the prompt inside ``forward``; it batches the pairs and encodes each pair's
image with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from auditor.core.errors import AuditorError, BackendError
from auditor.core.fingerprint import settings_fingerprint
from auditor.core.registry import Spec
from auditor.core.weights import (
    LoadOptions,
    check_complete,
    device_kind,
    dtype_keyword,
    hub_options,
    loaded_model_ref,
    loading_model,
    loading_problems,
)
from auditor.perception.base import first_line
from auditor.perception.registry import VQA_BACKENDS
from auditor.records import ModelRef, PerceptionSettings

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

_WHAT = "VQA"
_HINT = "pass --vqa /path/to/local/copy"


class TransformersVqa:
    """Shared driver: encode images once, then answer (image, question) pairs in batches.

    Subclasses say how to encode images (``_encode``) and how to answer a batch of pairs
    from those encodings (``_answer_batch``), and which prompt wraps a question.
    """

    #: How a question is put to the model; ``{question}`` is replaced.
    question_template = "{question}"
    #: How the caption question is put to the model.
    caption_template = "{question}"

    def __init__(self, model: Any, processor: Any, ref: ModelRef, settings: PerceptionSettings):
        self.model = model
        self.processor = processor
        self.ref = ref
        self.settings = settings

    @property
    def device(self) -> Any:
        return self.model.device

    @property
    def dtype(self) -> Any:
        return self.model.dtype

    def cache_fingerprint(self) -> str:
        return settings_fingerprint(
            self.ref.fingerprint,
            backend=self.ref.backend,
            dtype=self.ref.dtype,
            device=device_kind(self.ref.device),
            question_template=self.question_template,
            caption_template=self.caption_template,
            max_new_tokens=self.settings.max_new_tokens,
            caption_max_new_tokens=self.settings.caption_max_new_tokens,
        )

    def answer(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[str],
        caption_question: str | None = None,
        wanted: Sequence[Sequence[int]] | None = None,
    ) -> list[list[str]]:
        """``result[i][j]`` answers ``questions[j]`` about ``images[i]``, every pair whatever ``wanted`` says: each
        question is one batch over all the images, which costs about what a batch of some of them does.

        A question equal to ``caption_question`` is the caption request: it gets the
        caption template and ``caption_max_new_tokens`` instead of the short-answer budget.
        """
        import torch

        if not images or not questions:
            return [[] for _ in images]
        rgb = [image.convert("RGB") for image in images]
        size = self.settings.batch_size
        answers: list[list[str]] = [[""] * len(questions) for _ in rgb]
        with torch.inference_mode():
            encoded: list[Any] = []
            for start in range(0, len(rgb), size):
                encoded += self._encode(rgb[start : start + size])
            for is_caption in (False, True):
                columns = [j for j, q in enumerate(questions) if (q == caption_question) is is_caption]
                template = self.caption_template if is_caption else self.question_template
                budget = self.settings.caption_max_new_tokens if is_caption else self.settings.max_new_tokens
                prompts_of = {j: template.format(question=questions[j]) for j in columns}
                length_of = {j: self._prompt_length(prompts_of[j]) for j in columns}
                # Shortest prompts first (stable: image order within a question): batches of similar length.
                pairs = sorted(((i, j) for i in range(len(rgb)) for j in columns), key=lambda pair: length_of[pair[1]])
                for start in range(0, len(pairs), size):
                    batch = pairs[start : start + size]
                    prompts = [prompts_of[j] for _, j in batch]
                    replies = self._answer_batch([encoded[i] for i, _ in batch], prompts, budget)
                    for (i, j), reply in zip(batch, replies, strict=True):
                        answers[i][j] = first_line(reply)
        return answers

    def _prompt_length(self, prompt: str) -> int:
        """Tokens of a prompt (its question part; what differs between the pairs' rows)."""
        return len(self.processor.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def _stop_rows(self, prompt_length: int) -> Any:
        """Stopping criteria that end a row once its first line is complete, for ``generate``."""
        from transformers import StoppingCriteriaList

        if self._newline_ids is None:
            tokenizer = self.processor.tokenizer
            texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
            self._newline_ids = [i for i, text in enumerate(texts) if "\n" in text]
        return StoppingCriteriaList([FirstLineComplete(self.processor.tokenizer, prompt_length, self._newline_ids)])

    _newline_ids: list[int] | None = None

    # ------------------------------------------------------------------ for subclasses

    def _pixels(self, images: list[Image.Image]) -> Any:
        """Pixel values in the vision tower's dtype (the model's may differ: BLIP-2 keeps its Q-Former in fp32)."""
        tower = getattr(self.model, "vision_model", self.model)
        pixels = self.processor.image_processor(images, return_tensors="pt")["pixel_values"]
        return pixels.to(self.device, tower.dtype)

    def _vision_states(self, images: list[Image.Image]) -> Any:
        """The vision encoder's last hidden states, one (patches, width) block per image."""
        return self.model.vision_model(pixel_values=self._pixels(images), return_dict=True).last_hidden_state

    def _encode(self, images: list[Image.Image]) -> list[Any]:
        """One encoding per image, in order: by default its vision-encoder states (BLIP, InstructBLIP).

        Models whose question-independent part goes further (BLIP-2) or that cannot split
        the image from the prompt (``hf:``) override this.
        """
        return list(self._vision_states(images))

    def _answer_batch(self, encoded: list[Any], prompts: list[str], max_new_tokens: int) -> list[str]:
        """One decoded reply per (encoding, prompt) pair."""
        raise NotImplementedError


class _QueryPrefixVqa(TransformersVqa):
    """BLIP-2 / InstructBLIP: projected Q-Former queries prefix the prompt of a language model."""

    def _generate_after_prefix(self, prefixes: list[Any], prompts: list[str], max_new_tokens: int) -> list[str]:
        """Greedy continuation of ``[prefix, prompt tokens]`` rows, left-padded into one batch."""
        import torch

        tokenizer = self.processor.tokenizer
        embed = self.model.get_input_embeddings()
        rows = []
        for prefix, prompt in zip(prefixes, prompts, strict=True):
            ids = torch.tensor(tokenizer(prompt, add_special_tokens=True)["input_ids"], device=self.device)
            rows.append(torch.cat([prefix.to(embed.weight.dtype), embed(ids)]))
        width = max(len(row) for row in rows)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        pad = embed(torch.tensor([pad_id], device=self.device))[0]
        inputs = torch.stack([torch.cat([pad.expand(width - len(row), -1), row]) for row in rows])
        mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows], device=self.device)
        output = self.model.language_model.generate(
            inputs_embeds=inputs,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad_id,
            stopping_criteria=self._stop_rows(0),
        )
        # With only embeddings as input, decoder-only models return just the new tokens.
        return tokenizer.batch_decode(output, skip_special_tokens=True)


class Blip2Vqa(_QueryPrefixVqa):
    """BLIP-2 (e.g. ``Salesforce/blip2-opt-2.7b``); the paper's VQA model and prompt format."""

    question_template = "Question: {question} Answer:"
    caption_template = "Question: {question} Answer:"

    def _encode(self, images: list[Image.Image]) -> list[Any]:
        """Vision encoder + Q-Former + projection: the language-model prefix of each image."""
        model = self.model
        image_embeds = self._vision_states(images)
        queries = model.qformer(
            query_embeds=model.query_tokens.expand(len(images), -1, -1),
            encoder_hidden_states=image_embeds,
            encoder_attention_mask=_all_positions(image_embeds),
            return_dict=True,
        ).last_hidden_state
        return list(model.language_projection(queries.to(model.language_projection.weight.dtype)))

    def _answer_batch(self, encoded: list[Any], prompts: list[str], max_new_tokens: int) -> list[str]:
        return self._generate_after_prefix(encoded, prompts, max_new_tokens)


class InstructBlipVqa(_QueryPrefixVqa):
    """InstructBLIP: the Q-Former also reads the instruction, so only the vision encoder runs once per image."""

    question_template = "Question: {question} Short answer:"
    caption_template = "{question}"

    def _answer_batch(self, encoded: list[Any], prompts: list[str], max_new_tokens: int) -> list[str]:
        import torch

        model = self.model
        image_embeds = torch.stack(encoded)
        image_mask = _all_positions(image_embeds)
        instruction = self.processor.qformer_tokenizer(prompts, padding=True, return_tensors="pt").to(self.device)
        queries = model.query_tokens.expand(len(prompts), -1, -1)
        query_mask = torch.ones(queries.shape[:-1], dtype=torch.long, device=self.device)
        output = model.qformer(
            input_ids=instruction["input_ids"],
            attention_mask=torch.cat([query_mask, instruction["attention_mask"]], dim=1),
            query_embeds=queries,
            encoder_hidden_states=image_embeds,
            encoder_attention_mask=image_mask,
            return_dict=True,
        ).last_hidden_state[:, : queries.shape[1]]
        prefixes = model.language_projection(output.to(model.language_projection.weight.dtype))
        return self._generate_after_prefix(list(prefixes), prompts, max_new_tokens)


class BlipVqa(TransformersVqa):
    """BLIP VQA (e.g. ``Salesforce/blip-vqa-base``): image once, question encoder + answer decoder per pair."""

    def _answer_batch(self, encoded: list[Any], prompts: list[str], max_new_tokens: int) -> list[str]:
        import torch

        model = self.model
        image_embeds = torch.stack(encoded)
        image_mask = _all_positions(image_embeds)
        question = self.processor.tokenizer(prompts, padding=True, return_tensors="pt").to(self.device)
        question_embeds = model.text_encoder(
            input_ids=question["input_ids"],
            attention_mask=question["attention_mask"],
            encoder_hidden_states=image_embeds,
            encoder_attention_mask=image_mask,
            return_dict=True,
        ).last_hidden_state
        start = torch.full((len(prompts), 1), model.decoder_start_token_id, device=self.device)
        output = model.text_decoder.generate(
            input_ids=start,
            eos_token_id=model.config.text_config.sep_token_id,
            pad_token_id=model.config.text_config.pad_token_id,
            # The question's own padding mask (the reference code attends to padding,
            # which would make an answer depend on the other questions in the batch).
            encoder_hidden_states=question_embeds,
            encoder_attention_mask=question["attention_mask"],
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            stopping_criteria=self._stop_rows(1),
        )
        # The decoder echoes its start token first; it is no part of the answer.
        return self.processor.tokenizer.batch_decode(output[:, 1:], skip_special_tokens=True)


class ImageTextToTextVqa(TransformersVqa):
    """Any ``AutoModelForImageTextToText`` chat model (LLaVA-style), prompted through its chat template."""

    question_template = "{question} Answer with a few words."
    caption_template = "{question}"

    def _encode(self, images: list[Image.Image]) -> list[Any]:
        return list(images)

    def _answer_batch(self, encoded: list[Any], prompts: list[str], max_new_tokens: int) -> list[str]:
        processor = self.processor
        texts = [
            processor.apply_chat_template(
                [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}],
                add_generation_prompt=True,
                tokenize=False,
            )
            for prompt in prompts
        ]
        processor.tokenizer.padding_side = "left"
        inputs = processor(images=encoded, text=texts, padding=True, return_tensors="pt").to(self.device)
        inputs = {k: v.to(self.dtype) if v.is_floating_point() else v for k, v in inputs.items()}
        width = inputs["input_ids"].shape[1]
        output = self.model.generate(
            **inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, stopping_criteria=self._stop_rows(width)
        )
        return processor.tokenizer.batch_decode(output[:, width:], skip_special_tokens=True)


def first_line_complete(text: str) -> bool:
    """Whether more text after ``text`` can no longer change :func:`first_line`: a non-blank line ends in a newline.

    The lines before the last newline are final whatever follows, so once one of them is
    non-blank the first non-empty line is among them.
    """
    return "\n" in text and text[: text.rindex("\n")].strip() != ""


class FirstLineComplete:
    """A ``generate`` stopping criterion: row r is done once the first line of its new text is complete.

    Checked only on rows whose last token holds a newline (``newline_ids``), by decoding
    the row's new tokens; :func:`first_line_complete` decides.
    """

    def __init__(self, tokenizer: Any, prompt_length: int, newline_ids: list[int]):
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.newline_ids = newline_ids
        self._newline_tensor: Any = None  # ``newline_ids`` on the device, made at the first step, not at every one

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        new = input_ids[:, self.prompt_length :]
        if new.shape[1] == 0 or not self.newline_ids:
            return done
        if self._newline_tensor is None or self._newline_tensor.device != input_ids.device:
            self._newline_tensor = torch.tensor(self.newline_ids, device=input_ids.device)
        ended_line = torch.isin(new[:, -1], self._newline_tensor)
        for row in ended_line.nonzero().flatten().tolist():
            done[row] = first_line_complete(self.tokenizer.decode(new[row], skip_special_tokens=True))
        return done


# ---------------------------------------------------------------------- loaders


def load_blip2(spec: Spec, settings: PerceptionSettings, options: LoadOptions = LoadOptions()) -> Blip2Vqa:
    """``blip2:<hub id or folder>``: a ``Blip2ForConditionalGeneration`` and its processor."""
    return _load(spec, settings, options, Blip2Vqa, "Blip2ForConditionalGeneration")


def load_blip(spec: Spec, settings: PerceptionSettings, options: LoadOptions = LoadOptions()) -> BlipVqa:
    """``blip:<hub id or folder>``: a ``BlipForQuestionAnswering`` (a VQA head, not the captioning model)."""
    return _load(spec, settings, options, BlipVqa, "BlipForQuestionAnswering")


def load_instructblip(spec: Spec, settings: PerceptionSettings, options: LoadOptions = LoadOptions()) -> InstructBlipVqa:
    """``instructblip:<hub id or folder>``: an ``InstructBlipForConditionalGeneration`` and its processor."""
    return _load(spec, settings, options, InstructBlipVqa, "InstructBlipForConditionalGeneration")


def load_image_text_to_text(
    spec: Spec, settings: PerceptionSettings, options: LoadOptions = LoadOptions()
) -> ImageTextToTextVqa:
    """``hf:<hub id or folder>``: any ``AutoModelForImageTextToText`` with a chat-template processor."""
    return _load(spec, settings, options, ImageTextToTextVqa, "AutoModelForImageTextToText")


def _load(
    spec: Spec,
    settings: PerceptionSettings,
    options: LoadOptions,
    backend: type[TransformersVqa],
    model_class: str,
) -> Any:
    """Load model and processor with ``from_pretrained``; refuse a model of another type than the backend's (in
    :data:`VQA_BACKENDS`), which preflight could not tell beforehand (a hub id, a path on a Ray worker)."""
    from auditor.core.devices import pick_device, pick_dtype

    model_id = spec.target
    if not model_id:
        raise AuditorError(f"the {spec.prefix} backend needs a model: --vqa {spec.prefix}:<hub id or folder>")
    device = pick_device(options.device)
    dtype = pick_dtype(device)
    hub = hub_options(model_id)
    with loading_model(_WHAT, model_id, _HINT):
        import transformers

        config = transformers.AutoConfig.from_pretrained(model_id, **hub)
        model_types = VQA_BACKENDS.model_types(spec.prefix)
        if model_types is not None and config.model_type not in model_types:
            raise BackendError(
                f"cannot load VQA model {model_id!r} as {spec.prefix}: it is a {config.model_type!r} model; "
                f"--vqa takes blip2:, blip:, instructblip: or hf: (image-text-to-text chat models)"
            )
        model, info = getattr(transformers, model_class).from_pretrained(
            model_id, output_loading_info=True, **{dtype_keyword("transformers"): dtype}, **hub
        )
        processor = transformers.AutoProcessor.from_pretrained(model_id, **hub)
    partial = check_complete(_WHAT, model_id, loading_problems(info), options)
    if backend is ImageTextToTextVqa and getattr(processor, "chat_template", None) is None:
        raise BackendError(f"VQA model {model_id!r} has no chat template; use blip2:, blip: or instructblip: for it")
    model = model.to(device).eval()
    ref = loaded_model_ref(spec, "config.json", dtype, device, options, partial)
    return backend(model, processor, ref, settings)


def _all_positions(states: Any) -> Any:
    """An attention mask over every position of ``states`` (images have no padding)."""
    import torch

    return torch.ones(states.shape[:-1], dtype=torch.long, device=states.device)

