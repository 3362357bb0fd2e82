"""Traced generation: a diffusers pipeline's images and what led to them, in one pass.

Prompt-to-image tracing (Wu et al., J. Imaging 2025) compares neutral, feminine and
masculine prompts at three stages of Stable Diffusion (text embedding, final latent z₀,
image) and asks which image regions each prompt word guided. :func:`trace` makes exactly
the images :meth:`DiffusersTextToImage.generate` makes (the same pipeline call with the
same arguments and seeded generators; nothing on the image's path is changed) and records,
during that one call:

* **the text encoder's output** per prompt (:class:`PromptEncoding`), from a forward hook on
  the pipeline's text encoder: the final hidden state the UNet reads, at the EOS token and
  averaged over the prompt's tokens (see :func:`prompt_encoding`);
* **the final latent z₀** before the VAE decodes it, from ``callback_on_step_end`` after the
  last denoising step: the same tensor ``output_type="latent"`` returns (VAE-scaled);
* **per-word cross-attention maps**, the paper's word attention (after DAAM): on every UNet
  cross-attention layer (``attn2``) a wrapper runs the layer's own processor and then adds
  softmax(QKᵀ/√d) per prompt token, from the layer's own Q and K, to sums over heads,
  layers and denoising steps (:class:`CrossAttentionRecorder`); a word's map is the sum of
  its tokens' maps, upsampled to the image size and normalised to [0, 1] (:func:`word_maps`;
  the recording is in :mod:`auditor.generation.attention_maps`).
  DAAM upsamples each layer's map bicubically and clamps it at 0; bilinear upsampling, used
  here, stays within its inputs' range, so no clamp is needed and the sums can be upsampled
  once per resolution.

Supported pipelines: UNet pipelines with one CLIP-style text encoder and a fast tokenizer
(Stable Diffusion 1.x and 2.x, the paper's models). Pipelines with a second text encoder
(SDXL) or without a UNet (SD3, Flux) are refused with one line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from auditor.core.errors import AuditorError
from auditor.core.fingerprint import settings_fingerprint
from auditor.generation.attention_maps import CrossAttentionRecorder, recording_cross_attention, word_maps
from auditor.generation.base import GeneratedPicture, GenerationItem

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from auditor.generation.diffusers_backend import DiffusersTextToImage

#: What the traces are, for the cache key (:func:`trace_fingerprint`): change it when a rule below changes.
TRACE_METHOD = {
    "text": "final hidden state: at the first EOS token; mean over tokens after BOS through EOS",
    "latent": "z0 after the last scheduler step, VAE-scaled",
    "attention": "softmax(QK^T/sqrt(d)) of the conditional half, summed over heads, attn2 layers and steps; "
    "bilinear upsampling; word = sum of its tokens; min-max to [0, 1]",
}


@dataclass
class PromptEncoding:
    """The text encoder's output for one prompt, as float32 vectors of the encoder's width."""

    #: Final hidden state at the EOS token (CLIP's ``pooler_output``).
    eos: np.ndarray
    #: Mean of the final hidden states after BOS through EOS (the prompt's tokens; no padding).
    mean: np.ndarray


@dataclass
class TracedPicture:
    """One generated image and its traces."""

    picture: GeneratedPicture
    encoding: PromptEncoding
    #: z₀, (channels, latent height, latent width) float32: what the VAE decoded.
    latent: np.ndarray
    #: Word (lower case) -> (height, width) float32 attention map in [0, 1], image-sized.
    word_maps: dict[str, np.ndarray]


@dataclass(frozen=True)
class PromptWord:
    """A word of a prompt as the pipeline's tokenizer splits it, and where its tokens are."""

    #: The word's text in the prompt, lower-cased.
    text: str
    #: Its positions in the padded token sequence (BOS is position 0); empty when truncated away.
    positions: tuple[int, ...]


def trace_fingerprint(backend: DiffusersTextToImage) -> str:
    """Cache key of :func:`trace`'s outputs: the backend's (weights and image settings) plus :data:`TRACE_METHOD`."""
    return settings_fingerprint(backend.cache_fingerprint(), trace=TRACE_METHOD)


def trace(
    backend: DiffusersTextToImage,
    items: Sequence[GenerationItem],
    words: Sequence[Sequence[str] | None] | None = None,
) -> list[TracedPicture]:
    """Generate ``items`` as ``backend.generate`` does, one pipeline call per batch, and trace them.

    ``words[i]`` names the words of item i's prompt to map (case-insensitive; a word that
    occurs several times gets the sum of all its occurrences' tokens); None, for the list
    or an entry, maps every word of the prompt. A word not in the prompt is an error.
    """
    import torch

    pipeline = _traceable(backend.pipeline)
    _unfuse_projections(backend)
    if words is not None and len(words) != len(items):
        raise AuditorError(f"trace got {len(words)} word lists for {len(items)} items")
    traced: list[TracedPicture] = []
    size = backend.settings.batch_size
    for start in range(0, len(items), size):
        batch = items[start : start + size]
        chosen = [
            _chosen_words(pipeline.tokenizer, item.prompt, words[start + i] if words else None)
            for i, item in enumerate(batch)
        ]
        input_ids = _input_ids(pipeline.tokenizer, [item.prompt for item in batch])
        recorder = CrossAttentionRecorder(len(batch))
        final: dict[str, Any] = {}

        def keep_latents(pipe: Any, step: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
            final["latents"] = tensors["latents"]
            return tensors

        with (
            torch.inference_mode(),
            recording_cross_attention(pipeline.unet, recorder),
            _text_encoder_calls(pipeline.text_encoder) as calls,
        ):
            output = pipeline(
                **backend.pipeline_arguments(batch),
                callback_on_step_end=keep_latents,
                callback_on_step_end_tensor_inputs=["latents"],
            )
        pictures = backend.pictures(output, len(batch))
        hidden = _prompt_hidden_states(calls, input_ids)
        latents = final["latents"]
        width, height = pictures[0].image.size
        maps = word_maps(recorder, chosen, tuple(latents.shape[-2:]), (height, width))
        for i, picture in enumerate(pictures):
            traced.append(
                TracedPicture(
                    picture=picture,
                    encoding=prompt_encoding(hidden[i], input_ids[i], pipeline.tokenizer.eos_token_id),
                    latent=latents[i].float().cpu().numpy(),
                    word_maps=maps[i],
                )
            )
    return traced


# --------------------------------------------------------------------------- text encoder


def prompt_encoding(hidden: torch.Tensor, input_ids: torch.Tensor, eos_token_id: int) -> PromptEncoding:
    """Summaries of one prompt's final hidden states ``hidden`` (sequence, width).

    The EOS token is the first ``eos_token_id`` in ``input_ids``: CLIP tokenizers end every
    prompt with ``<|endoftext|>`` (also after truncation) and CLIP text models pool exactly
    that position (``pooler_output``). SD 1.x pads with the same token and SD 2.x with
    ``!``, so the first occurrence is the prompt's own; SD 1.x's text encoder config still
    says ``eos_token_id=2`` and so pools at the highest token id, which is ``<|endoftext|>``
    at that same position. The mean skips BOS, whose state is the same for every prompt
    under CLIP's causal mask, and the padding after EOS.
    """
    matches = (input_ids == eos_token_id).nonzero()
    if len(matches) == 0:
        raise AuditorError(
            "the pipeline's tokenizer put no end-of-text token in a prompt, so its text embedding is undefined"
        )
    eos = int(matches[0])
    states = hidden.float()
    return PromptEncoding(
        eos=states[eos].cpu().numpy(),
        mean=states[1 : eos + 1].mean(dim=0).cpu().numpy(),
    )


def _input_ids(tokenizer: Any, prompts: list[str]) -> torch.Tensor:
    """The prompts' token ids exactly as Stable Diffusion pipelines tokenize them (padded to the model's length)."""
    return tokenizer(
        prompts, padding="max_length", max_length=tokenizer.model_max_length, truncation=True, return_tensors="pt"
    ).input_ids


@contextmanager
def _text_encoder_calls(text_encoder: Any) -> Iterator[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Collect ``(input_ids, final hidden states)`` of every text encoder call while the block runs."""
    calls: list[tuple[Any, Any]] = []

    def hook(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        ids = args[0] if args else kwargs.get("input_ids")
        calls.append((ids, output[0]))

    handle = text_encoder.register_forward_hook(hook, with_kwargs=True)
    try:
        yield calls
    finally:
        handle.remove()


def _prompt_hidden_states(calls: list[tuple[Any, Any]], input_ids: torch.Tensor) -> torch.Tensor:
    """The final hidden states of the call that encoded these prompts (the other encodes the negative prompt)."""
    for ids, hidden in calls:
        if ids is not None and ids.shape == input_ids.shape and bool((ids.cpu() == input_ids).all()):
            return hidden
    raise AuditorError(
        "the pipeline did not encode the prompts with its text encoder as Stable Diffusion does; cannot trace it"
    )


# --------------------------------------------------------------------------- words and tokens


def prompt_words(tokenizer: Any, prompt: str) -> list[PromptWord]:
    """The words of ``prompt`` as the tokenizer's pre-tokenizer splits them, with their token positions.

    Positions index the padded sequence the text encoder reads (BOS at 0). A word split
    into several BPE tokens ("pharmacist" -> "pharma", "cist") has all of them; its map
    is their sum (the mean would differ by a constant factor, which the [0, 1]
    normalisation removes).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise AuditorError(
            "tracing maps prompt words to tokens with a fast tokenizer; this pipeline loaded a slow "
            f"{type(tokenizer).__name__} (transformers 5 loads fast ones): upgrade transformers"
        )
    encoding = tokenizer(prompt, padding="max_length", max_length=tokenizer.model_max_length, truncation=True)
    positions: dict[int, list[int]] = {}
    for position, word in enumerate(encoding.word_ids()):
        if word is not None:
            positions.setdefault(word, []).append(position)
    untruncated = tokenizer(prompt, verbose=False)  # also the words truncation drops (no warning)
    words = []
    for word in sorted({w for w in untruncated.word_ids() if w is not None}):
        span = untruncated.word_to_chars(word)
        words.append(PromptWord(prompt[span.start : span.end].lower(), tuple(positions.get(word, ()))))
    return words


def _chosen_words(tokenizer: Any, prompt: str, wanted: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """Word -> its token positions (all occurrences), for the ``wanted`` words or every word of ``prompt``."""
    merged: dict[str, tuple[int, ...]] = {}
    for word in prompt_words(tokenizer, prompt):
        merged[word.text] = merged.get(word.text, ()) + word.positions
    if wanted is None:
        return merged
    missing = [w for w in wanted if w.lower() not in merged]
    if missing:
        raise AuditorError(f"cannot map {', '.join(map(repr, missing))}: not a word of the prompt {prompt!r}")
    return {w.lower(): merged[w.lower()] for w in wanted}


def _unfuse_projections(backend: DiffusersTextToImage) -> None:
    """Undo fused QKV projections (a CUDA speed-up) so the recorder sees each layer's own ``to_q``/``to_k``.

    Fusing changes outputs only within floating-point noise; the backend's settings stop
    listing it, so the record says what ran.
    """
    if "fused_qkv" not in backend.settings.optimizations:
        return
    for name in ("unet", "vae"):
        model = getattr(backend.pipeline, name, None)
        if getattr(model, "original_attn_processors", None) is not None:  # set by fuse_qkv_projections
            model.unfuse_qkv_projections()
    kept = [name for name in backend.settings.optimizations if name != "fused_qkv"]
    backend.settings = backend.settings.model_copy(update={"optimizations": kept})


def _traceable(pipeline: Any) -> Any:
    """``pipeline`` if tracing can read it (a UNet, one text encoder, a tokenizer), else a one-line error."""
    missing = [part for part in ("unet", "text_encoder", "tokenizer") if getattr(pipeline, part, None) is None]
    if missing or getattr(pipeline, "text_encoder_2", None) is not None:
        raise AuditorError(
            f"prompt-to-image tracing needs a UNet pipeline with one CLIP text encoder (Stable Diffusion 1.x/2.x); "
            f"{type(pipeline).__name__} is not one"
        )
    return pipeline
