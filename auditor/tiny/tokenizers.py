"""Tiny byte-level BPE tokenizers trained on the fly with the ``tokenizers`` library.

No tokenizer files can be downloaded here, so the tiny models get tokenizers trained in
a fraction of a second on a small built-in corpus of audit-style text. They are wrapped
in the real transformers tokenizer classes (``CLIPTokenizer``, ``GPT2Tokenizer`` as OPT
uses) so that ``save_pretrained``/``from_pretrained`` exercise the same files real
models ship. Byte-level BPE encodes any text, so no input is ever out of vocabulary.
"""

from __future__ import annotations

import json
from typing import Any

#: Text the tokenizers learn their merges from: prompts, VQA questions and answers.
_CORPUS = (
    "a photo of a pharmacist",
    "a photo of a female pharmacist",
    "a photo of a male pharmacist",
    "a photo of a young doctor in a hospital",
    "a portrait of an old teacher in a classroom",
    "a painting of a nurse, an engineer, a chef and a scientist",
    "What is the gender (male, female, other) of the person in the image?",
    "What age group (young, middle, old) is the person in the image?",
    "What is the ethnicity of the person in the image?",
    "What is the setting of the image? What is the style of the image?",
    "Describe the image. Describe the background of the image.",
    "Question: What is the person wearing? Answer: a white coat",
    "a man standing behind a counter in a pharmacy with shelves of medicine",
    "a woman smiling at the camera, wearing glasses and a lab coat",
    "science, arts, career, family, pleasant, unpleasant, instruments, weapons",
)
_CORPUS_REPEATS = 20


def _train_bpe(
    vocab_size: int, special_tokens: list[str], *, clip_style: bool
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Train a byte-level BPE and return its ``(vocab, merges)``.

    ``clip_style`` reproduces CLIP's text pipeline (lower-casing, word splitting, ``</w>``
    end-of-word suffix); otherwise GPT-2 style (leading-space tokens, no suffix).
    """
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    suffix = {"end_of_word_suffix": "</w>"} if clip_style else {}
    tokenizer = Tokenizer(BPE(**suffix))
    if clip_style:
        tokenizer.normalizer = normalizers.Sequence(
            [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
        )
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(
                    Regex(r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""),
                    behavior="removed",
                    invert=True,
                ),
                pre_tokenizers.ByteLevel(add_prefix_space=False),
            ]
        )
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    # The trainer numbers word-final forms ("a</w>") in hash order, which breaks ties
    # between equally frequent merges differently on every run. Declaring all of them up
    # front fixes their ids (and so the merges), and leaves no byte without a word-final form.
    fixed_tokens = special_tokens + ([c + "</w>" for c in alphabet] if clip_style else [])
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=fixed_tokens,
        initial_alphabet=alphabet,
        **suffix,
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(_CORPUS) * _CORPUS_REPEATS, trainer=trainer)
    model: dict[str, Any] = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return dict(model["vocab"]), merges


def clip_tokenizer(vocab_size: int = 600, model_max_length: int = 77, pad_token: str | None = None) -> Any:
    """A ``CLIPTokenizer`` with CLIP's special tokens and a freshly trained vocabulary.

    ``pad_token`` (OWL-ViT and OWLv2 pad with ``"!"``) gets id 0, ahead of BOS: their
    detection heads treat a text query whose first id is 0 as padding, so BOS must not be 0
    there. Without it, padding is ``<|endoftext|>`` as in CLIP.
    """
    from transformers import CLIPTokenizer

    specials = ["<|startoftext|>", "<|endoftext|>"]
    vocab, merges = _train_bpe(vocab_size, [pad_token, *specials] if pad_token else specials, clip_style=True)
    padding = {"pad_token": pad_token} if pad_token else {}
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=model_max_length, **padding)


def opt_tokenizer(vocab_size: int = 400) -> Any:
    """A ``GPT2Tokenizer`` set up as OPT's (``</s>`` bos/eos, ``<pad>`` padding, bos prepended)."""
    from transformers import GPT2Tokenizer

    vocab, merges = _train_bpe(vocab_size, ["<pad>", "</s>", "<unk>"], clip_style=False)
    return GPT2Tokenizer(
        vocab=vocab,
        merges=merges,
        bos_token="</s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        add_bos_token=True,
        padding_side="left",
    )


def bert_tokenizer(vocab_size: int = 300, extra_special_tokens: tuple[str, ...] = ()) -> Any:
    """A ``BertTokenizer`` (WordPiece, lower-cased) as BLIP's text side and Q-Formers use.

    ``extra_special_tokens`` are appended to the vocabulary (BLIP's decoder start ``[DEC]``).
    """
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer
    from transformers import BertTokenizer

    corpus = [text.lower() for text in _CORPUS]
    alphabet = sorted({char for text in corpus for char in text if not char.isspace()})
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *extra_special_tokens]
    tokenizer = Tokenizer(WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        # Continuation pieces ("##a") declared up front get fixed ids (see _train_bpe).
        special_tokens=specials + ["##" + char for char in alphabet],
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus * _CORPUS_REPEATS, trainer=trainer)
    return BertTokenizer(vocab=dict(json.loads(tokenizer.to_str())["model"]["vocab"]))
