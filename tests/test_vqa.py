"""VQA backends on tiny random models, loaded through the registry like real checkpoints.

The BLIP-2 model is the session's tiny one; BLIP, InstructBLIP and a LLaVA-style model
are built here from small configs (same ``save_pretrained`` / ``from_pretrained`` path).
Answers of random models are gibberish: the tests check shapes, batching invariance,
encode-once, token budgets, fingerprints and errors, not content.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from PIL import Image

from auditor.core.errors import BackendError
from auditor.core.fingerprint import folder_fingerprint
from auditor.perception.base import first_line
from auditor.perception.registry import VQA_BACKENDS
from auditor.records import PerceptionSettings

QUESTIONS = [
    "What is the gender (male, female, other) of the person in the image?",
    "What is the setting of the image?",
    "Describe the image.",
]
CAPTION = QUESTIONS[-1]
SETTINGS = PerceptionSettings(max_new_tokens=3, caption_max_new_tokens=7, batch_size=16)


@pytest.fixture(scope="module")
def images() -> list[Image.Image]:
    import numpy as np

    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)) for _ in range(3)]


@pytest.fixture(scope="module")
def blip2(tiny_models):
    """The tiny BLIP-2, given as a bare folder: the registry infers ``blip2:`` from its config."""
    return VQA_BACKENDS.load(str(tiny_models.vqa), settings=SETTINGS)


def _one_by_one(vqa, images, questions, caption=CAPTION) -> list[list[str]]:
    return [[vqa.answer([image], [question], caption)[0][0] for question in questions] for image in images]


def test_bare_folder_is_inferred_as_blip2_and_recorded(blip2, tiny_models):
    assert VQA_BACKENDS.check(str(tiny_models.vqa)).prefix == "blip2"
    assert type(blip2).__name__ == "Blip2Vqa"
    assert blip2.ref.backend == "blip2" and blip2.ref.model_id == str(tiny_models.vqa)
    assert blip2.ref.fingerprint == folder_fingerprint(tiny_models.vqa)
    assert (blip2.ref.dtype, blip2.ref.device, blip2.ref.revision) == ("float32", "cpu", None)


def test_blip2_one_string_per_image_and_question(blip2, images):
    answers = blip2.answer(images, QUESTIONS, caption_question=CAPTION)
    assert len(answers) == len(images) and all(len(row) == len(QUESTIONS) for row in answers)
    assert all(isinstance(a, str) and "\n" not in a and a == a.strip() for row in answers for a in row)
    assert blip2.answer(images, []) == [[], [], []] and blip2.answer([], QUESTIONS) == []


def test_blip2_batched_answers_equal_unbatched(blip2, images):
    batched = blip2.answer(images, QUESTIONS, caption_question=CAPTION)
    assert _one_by_one(blip2, images[:2], QUESTIONS) == batched[:2]
    blip2.settings = SETTINGS.model_copy(update={"batch_size": 2})  # pairs split 2 + 2 + 2, then 2 + 1
    try:
        assert blip2.answer(images, QUESTIONS, caption_question=CAPTION) == batched
    finally:
        blip2.settings = SETTINGS


def test_blip2_answers_match_transformers_own_generate(blip2, images):
    """Encoding once and generating from embeddings gives what ``Blip2ForConditionalGeneration.generate`` gives."""
    import torch

    ours = blip2.answer(images, QUESTIONS[:2])
    processor = blip2.processor
    for j, question in enumerate(QUESTIONS[:2]):
        inputs = processor(images=images, text=[f"Question: {question} Answer:"] * len(images), return_tensors="pt")
        with torch.inference_mode():
            output = blip2.model.generate(**inputs, max_new_tokens=SETTINGS.max_new_tokens, do_sample=False)
        replies = processor.tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        assert [row[j] for row in ours] == [reply.strip() for reply in replies]


@contextmanager
def _batch_sizes(model, *names: str) -> Iterator[dict[str, list[int]]]:
    """Record the batch size of every forward call of the named sub-modules of ``model``."""
    seen: dict[str, list[int]] = {name: [] for name in names}

    def counter(name: str):
        def hook(module, args, kwargs, output) -> None:
            inputs = [v for v in (*args, *kwargs.values()) if hasattr(v, "shape") and v.dim() >= 2]
            seen[name].append(inputs[0].shape[0])

        return hook

    hooks = [getattr(model, name).register_forward_hook(counter(name), with_kwargs=True) for name in names]
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


def test_blip2_encodes_each_image_once_and_batches_the_pairs(blip2, images):
    with _batch_sizes(blip2.model, "vision_model", "qformer", "language_model") as seen:
        blip2.answer(images, QUESTIONS, caption_question=CAPTION)
    assert seen["vision_model"] == [3] and seen["qformer"] == [3]  # once per image, not per question
    # The 6 short-answer pairs in one batch, then the 3 captions: one forward per new token.
    assert set(seen["language_model"]) == {6, 3}


def test_blip2_caption_gets_its_own_token_budget(blip2, images):
    with _batch_sizes(blip2.model, "language_model") as seen:
        blip2.answer(images, QUESTIONS, caption_question=CAPTION)
    steps = seen["language_model"]
    assert steps.count(6) <= SETTINGS.max_new_tokens
    assert SETTINGS.max_new_tokens < steps.count(3) <= SETTINGS.caption_max_new_tokens
    # Without naming the caption question, it is a short-answer question like the rest: one batch of 9.
    with _batch_sizes(blip2.model, "language_model") as seen:
        blip2.answer(images, QUESTIONS)
    assert set(seen["language_model"]) == {9} and len(seen["language_model"]) <= SETTINGS.max_new_tokens


def test_blip2_fingerprint_is_stable_and_follows_answer_settings(blip2, tiny_models):
    def fingerprint(**changes) -> str:
        settings = SETTINGS.model_copy(update=changes)
        return VQA_BACKENDS.load(f"blip2:{tiny_models.vqa}", settings=settings).cache_fingerprint()

    assert fingerprint() == blip2.cache_fingerprint()
    assert fingerprint(batch_size=1) == blip2.cache_fingerprint()
    assert len({fingerprint(max_new_tokens=4), fingerprint(caption_max_new_tokens=8), blip2.cache_fingerprint()}) == 3


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("blip2:auditor-tests/no-such-vqa", "not in the local Hugging Face cache and the hub is unreachable"),
        ("blip2:./no-such-folder", "no such folder"),
        ("hf:auditor-tests/no-such-vqa", "not in the local Hugging Face cache and the hub is unreachable"),
    ],
)
def test_missing_weights_is_one_line_naming_the_model_and_option(spec, expected):
    with pytest.raises(BackendError) as caught:
        VQA_BACKENDS.load(spec, settings=SETTINGS)
    message = str(caught.value)
    assert "\n" not in message and expected in message
    assert repr(spec.partition(":")[2]) in message and "--vqa" in message


@pytest.mark.parametrize("role", ["vqa", "clip"])
def test_a_damaged_weights_file_is_one_line_naming_the_model(role, tiny_models, tmp_path):
    """transformers lets a damaged .safetensors file's own error type through (not an OSError): still one line."""
    import shutil

    from auditor.perception.registry import EMBEDDERS

    folder = tmp_path / role
    shutil.copytree(getattr(tiny_models, role), folder)
    (folder / "model.safetensors").write_text("garbage")
    with pytest.raises(BackendError) as caught:
        if role == "vqa":
            VQA_BACKENDS.load(f"blip2:{folder}", settings=SETTINGS)
        else:
            EMBEDDERS.load(f"clip:{folder}")
    message = str(caught.value)
    assert message.startswith("cannot load ") and repr(str(folder)) in message and "\n" not in message


def test_folder_of_another_model_type_is_refused(tiny_models):
    with pytest.raises(BackendError, match="it is a 'clip' model") as caught:
        VQA_BACKENDS.load(f"blip2:{tiny_models.clip}", settings=SETTINGS)
    assert "\n" not in str(caught.value)


# --------------------------------------------------------------------------- BLIP, InstructBLIP, LLaVA-style

_VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
           "image_size": 32, "patch_size": 8}
_LAYERS = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}


def _build_blip(folder) -> None:
    import torch
    from transformers import (
        BlipConfig,
        BlipForQuestionAnswering,
        BlipImageProcessor,
        BlipProcessor,
    )

    from auditor.tiny.tokenizers import bert_tokenizer

    tokenizer = bert_tokenizer(extra_special_tokens=("[DEC]",))
    text = {**_LAYERS, "vocab_size": len(tokenizer), "encoder_hidden_size": 32, "max_position_embeddings": 64,
            "pad_token_id": tokenizer.pad_token_id, "sep_token_id": tokenizer.sep_token_id,
            "bos_token_id": tokenizer.convert_tokens_to_ids("[DEC]")}
    torch.manual_seed(0)
    BlipForQuestionAnswering(BlipConfig(text_config=text, vision_config=_VISION)).save_pretrained(folder)
    image_processor = BlipImageProcessor(size={"height": 32, "width": 32})
    BlipProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)


def _opt_config(tokenizer) -> dict:
    return {**{k: v for k, v in _LAYERS.items() if k != "intermediate_size"}, "model_type": "opt", "ffn_dim": 64,
            "vocab_size": len(tokenizer), "word_embed_proj_dim": 32, "max_position_embeddings": 128,
            "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id}


def _build_instructblip(folder) -> None:
    import torch
    from transformers import (
        BlipImageProcessor,
        InstructBlipConfig,
        InstructBlipForConditionalGeneration,
        InstructBlipProcessor,
    )

    from auditor.tiny.tokenizers import bert_tokenizer, opt_tokenizer

    qformer_tokenizer = bert_tokenizer()
    processor = InstructBlipProcessor(
        image_processor=BlipImageProcessor(size={"height": 32, "width": 32}),
        tokenizer=opt_tokenizer(),
        qformer_tokenizer=qformer_tokenizer,
        num_query_tokens=4,
    )
    tokenizer = processor.tokenizer
    config = InstructBlipConfig(
        vision_config=_VISION,
        qformer_config={**_LAYERS, "vocab_size": len(qformer_tokenizer), "encoder_hidden_size": 32,
                        "max_position_embeddings": 64, "pad_token_id": qformer_tokenizer.pad_token_id},
        text_config=_opt_config(tokenizer),
        num_query_tokens=4,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
    )
    torch.manual_seed(0)
    InstructBlipForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)


_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'].upper() }}: "
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n{% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}\n{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def _build_llava(folder) -> None:
    import torch
    from transformers import (
        CLIPImageProcessor,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    from auditor.tiny.tokenizers import opt_tokenizer

    tokenizer = opt_tokenizer()
    tokenizer.add_tokens(["<image>"], special_tokens=True)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's class token, dropped by the "default" strategy
        chat_template=_CHAT_TEMPLATE,
    )
    config = LlavaConfig(
        vision_config={**_VISION, "model_type": "clip_vision_model"},
        text_config={**_LAYERS, "model_type": "llama", "vocab_size": len(tokenizer), "num_key_value_heads": 4,
                     "max_position_embeddings": 256, "pad_token_id": tokenizer.pad_token_id,
                     "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id},
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        image_seq_length=16,
    )
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)


@pytest.fixture(scope="module")
def other_vqa_models(tmp_path_factory) -> dict:
    """Folders of tiny BLIP (VQA head), InstructBLIP and LLaVA models, keyed by the prefix they infer to."""
    from auditor.core.weights import quiet_libraries

    root = tmp_path_factory.mktemp("vqa-models")
    builders = {"blip": _build_blip, "instructblip": _build_instructblip, "hf": _build_llava}
    with quiet_libraries("transformers"):
        for name, build in builders.items():
            build(root / name)
    return {name: root / name for name in builders}


@pytest.mark.parametrize(
    ("prefix", "backend"), [("blip", "BlipVqa"), ("instructblip", "InstructBlipVqa"), ("hf", "ImageTextToTextVqa")]
)
def test_other_vqa_families_answer_every_pair_batch_invariantly(other_vqa_models, images, prefix, backend):
    folder = str(other_vqa_models[prefix])
    assert VQA_BACKENDS.check(folder).prefix == prefix  # inferred from the folder's model type
    vqa = VQA_BACKENDS.load(folder, settings=SETTINGS)
    assert type(vqa).__name__ == backend and vqa.ref.backend == prefix
    answers = vqa.answer(images[:2], QUESTIONS, caption_question=CAPTION)
    assert [len(row) for row in answers] == [3, 3] and all(isinstance(a, str) for row in answers for a in row)
    assert not any("[DEC]" in a for row in answers for a in row)  # BLIP's decoder start token is not an answer
    assert _one_by_one(vqa, images[:2], QUESTIONS) == answers


def test_first_line_complete_only_when_later_text_cannot_change_the_first_line():
    from auditor.perception.vqa import first_line_complete

    assert not first_line_complete("a nurse")
    assert not first_line_complete("  \n\n ")  # no line with text yet
    assert first_line_complete("a nurse\n") and first_line_complete("\n a nurse \nin a")
    for text in ("a nurse\n", "\n a nurse \nin a", "a\rb\nc"):
        assert first_line(text) == first_line(text + "whatever follows\nmore")


def test_rows_stop_at_the_end_of_their_first_line_with_the_same_answers(tiny_models, images):
    """A newline made likely after the first token (transformers' own ``sequence_bias``): rows end
    early, and the answers are still the first lines of what ``generate`` writes without stopping."""
    import torch

    vqa = VQA_BACKENDS.load(f"blip2:{tiny_models.vqa}", settings=SETTINGS.model_copy(update={"max_new_tokens": 12}))
    tokenizer = vqa.processor.tokenizer
    newline = next(i for i, text in enumerate(tokenizer.batch_decode([[i] for i in range(len(tokenizer))])) if "\n" in text)
    question = QUESTIONS[0]
    inputs = vqa.processor(images=images, text=[f"Question: {question} Answer:"] * len(images), return_tensors="pt")
    with torch.inference_mode():
        plain = vqa.model.generate(
            **inputs, max_new_tokens=12, do_sample=False, output_scores=True, return_dict_in_generate=True
        )
        # How far the newline's logit is below the winner's, per row and step; a bias between the first
        # step's margins and the smallest later one makes the first token text and a later one a newline.
        margins = torch.stack([scores.max(-1).values - scores[:, newline] for scores in plain.scores], dim=1)
        vqa.model.language_model.generation_config.sequence_bias = {
            (newline,): float(margins[:, 0].min() + margins[:, 1:].min()) / 2
        }
        reference = vqa.model.generate(**inputs, max_new_tokens=12, do_sample=False)
    texts = tokenizer.batch_decode(reference[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert all(first_line(text) and "\n" in text for text in texts), texts
    with _batch_sizes(vqa.model, "language_model") as seen:
        ours = vqa.answer(images, [question])
    assert [row[0] for row in ours] == [first_line(text) for text in texts]
    assert len(seen["language_model"]) < 12  # the batch ended as soon as every row's first line had
