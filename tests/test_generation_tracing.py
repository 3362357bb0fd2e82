"""Traced generation on the tiny two-resolution pipeline: same images, z0, text encodings, attention maps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditor.core.errors import AuditorError
from auditor.generation.attention_maps import CrossAttentionRecorder, recording_cross_attention
from auditor.generation.base import GenerationItem
from auditor.generation.registry import T2I_BACKENDS
from auditor.generation.tracing import prompt_words, trace, trace_fingerprint
from auditor.records import GenerationSettings

PROMPT = "a photo of a pharmacist"
SMILING = "a photo of a female pharmacist, smiling"
#: Width and height of the traced images: not square, so rows and columns cannot be swapped unnoticed.
WIDTH, HEIGHT = 48, 40


def _load(tiny_tracing_models, **settings):
    defaults = {"steps": 2, "batch_size": 2, "width": WIDTH, "height": HEIGHT}
    return T2I_BACKENDS.load(
        f"diffusers:{tiny_tracing_models.t2i}", settings=GenerationSettings(**{**defaults, **settings})
    )


@pytest.fixture(scope="module")
def backend(tiny_tracing_models):
    return _load(tiny_tracing_models)


@pytest.fixture(scope="module")
def items():
    return [GenerationItem(PROMPT, 0, 11), GenerationItem(SMILING, 0, 11), GenerationItem(PROMPT, 1, 12)]


@pytest.fixture(scope="module")
def traced(backend, items):
    return trace(backend, items, words=[None, ["smiling", "Pharmacist"], ["photo"]])


def _token_maps(backend, items):
    """Unnormalised per-token maps of one pipeline call, image-sized: (items, tokens, height, width)."""
    import torch

    recorder = CrossAttentionRecorder(len(items))
    with torch.inference_mode(), recording_cross_attention(backend.pipeline.unet, recorder):
        latents = backend.pipeline(**{**backend.pipeline_arguments(items), "output_type": "latent"}).images
    identity = torch.eye(recorder.tokens).expand(len(items), -1, -1)
    return recorder, recorder.maps(identity, tuple(latents.shape[-2:]), (HEIGHT, WIDTH)).numpy()


def test_traced_images_are_bitwise_the_backends_images(backend, items, traced):
    plain = backend.generate(items)
    assert len(traced) == len(items)
    for picture, trace_ in zip(plain, traced):
        assert trace_.picture.image.size == (WIDTH, HEIGHT)
        assert np.array_equal(np.asarray(picture.image), np.asarray(trace_.picture.image))
        assert trace_.picture.flagged_nsfw == picture.flagged_nsfw


def test_captured_latent_is_the_output_type_latent_run(backend, items, traced):
    import torch

    size = backend.settings.batch_size
    with torch.inference_mode():  # the same batches as trace's (batch composition changes float rounding)
        latents = torch.cat(
            [
                backend.pipeline(**{**backend.pipeline_arguments(items[i : i + size]), "output_type": "latent"}).images
                for i in range(0, len(items), size)
            ]
        )
    assert latents.shape[-2:] == (HEIGHT // 2, WIDTH // 2)  # the tiny VAE scales by 2
    for i, trace_ in enumerate(traced):
        assert trace_.latent.dtype == np.float32
        assert np.array_equal(trace_.latent, latents[i].numpy())
    # Image 0 and 2 share the prompt but not the seed.
    assert not np.allclose(traced[0].latent, traced[2].latent)


def test_prompt_encoding_is_clips_pooled_eos_state_and_the_token_mean(backend, traced):
    import torch

    pipeline = backend.pipeline
    tokenizer = pipeline.tokenizer
    for prompt, trace_ in ((PROMPT, traced[0]), (SMILING, traced[1])):
        ids = tokenizer(
            [prompt], padding="max_length", max_length=tokenizer.model_max_length, truncation=True, return_tensors="pt"
        ).input_ids
        with torch.inference_mode():
            output = pipeline.text_encoder(ids)
        eos = int((ids[0] == tokenizer.eos_token_id).nonzero()[0])
        assert eos == len(tokenizer(prompt).input_ids) - 1  # the prompt's own end-of-text token
        np.testing.assert_allclose(trace_.encoding.eos, output.pooler_output[0].numpy(), rtol=1e-6, atol=1e-6)
        expected_mean = output.last_hidden_state[0, 1 : eos + 1].mean(dim=0).numpy()
        np.testing.assert_allclose(trace_.encoding.mean, expected_mean, rtol=1e-6, atol=1e-6)
    # Same prompt, other seed and batch: same encoding; other prompt: another one.
    np.testing.assert_array_equal(traced[0].encoding.eos, traced[2].encoding.eos)
    assert not np.allclose(traced[0].encoding.mean, traced[1].encoding.mean)


@pytest.mark.parametrize("guidance", [7.5, 1.0], ids=["guided", "unguided"])
def test_token_maps_sum_to_heads_times_layers_times_steps(tiny_tracing_models, items, guidance):
    """Each softmax row over tokens sums to 1: per position, the token maps add up to the heads recorded.

    A softmax over positions instead of tokens, a missing softmax, averaged heads or a
    position mix-up between resolutions would each break this equality.
    """
    backend = _load(tiny_tracing_models, guidance_scale=guidance)
    unet = backend.pipeline.unet
    unet_calls = []
    handle = unet.register_forward_hook(lambda module, args, output: unet_calls.append(len(args[0])))
    try:
        recorder, maps = _token_maps(backend, items[:2])
    finally:
        handle.remove()
    layer_heads = [module.heads for name, module in unet.named_modules() if name.endswith("attn2")]
    assert sorted(set(layer_heads)) == [2, 4]  # heads differ between layers: sum, not mean
    assert set(unet_calls) == {4 if guidance > 1 else 2}  # guidance doubles the batch
    expected = len(unet_calls) * sum(layer_heads)
    assert recorder.heads == expected
    assert sorted(recorder.sums) == [10 * 12, 20 * 24]  # the latent grid and its half, both recorded
    assert maps.shape == (2, 77, HEIGHT, WIDTH)
    np.testing.assert_allclose(maps.sum(axis=1), expected, rtol=1e-5)
    assert maps.std(axis=(-2, -1)).max() > 1e-3  # the maps themselves are not flat


def test_recorder_is_softmax_of_scaled_scores_of_the_conditional_half(backend):
    """One cross-attention layer of the UNet, checked against softmax(QK^T/sqrt(d)) written out by hand."""
    import torch

    unet = backend.pipeline.unet
    name = next(name for name, _ in unet.named_modules() if name.endswith("attn2"))
    attn = unet.get_submodule(name)
    items, positions, tokens = 2, 10 * 12, 77
    heads, head_dim = attn.heads, attn.to_q.out_features // attn.heads
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2 * items, positions, attn.to_q.in_features, generator=generator)
    context = torch.randn(2 * items, tokens, attn.to_k.in_features, generator=generator)
    with torch.inference_mode():
        plain = attn(hidden, encoder_hidden_states=context)
        recorder = CrossAttentionRecorder(items)
        with recording_cross_attention(unet, recorder):
            recorded = attn(hidden, encoder_hidden_states=context)
        query = attn.to_q(hidden[items:]).view(items, positions, heads, head_dim).transpose(1, 2)
        key = attn.to_k(context[items:]).view(items, tokens, heads, head_dim).transpose(1, 2)
        by_hand = torch.softmax(query @ key.transpose(-1, -2) / math.sqrt(head_dim), dim=-1)  # (items, heads, P, T)
        expected = by_hand.sum(dim=1).transpose(1, 2)  # (items, tokens, positions)
    assert torch.equal(plain, recorded)  # the layer's output is untouched
    assert list(recorder.sums) == [positions] and recorder.heads == heads
    torch.testing.assert_close(recorder.sums[positions], expected)

    # The unconditional half (first) is ignored; the conditional half is what counts.
    changed = hidden.clone()
    changed[:items] = torch.randn(items, positions, attn.to_q.in_features, generator=generator)
    other = CrossAttentionRecorder(items)
    with torch.inference_mode(), recording_cross_attention(unet, other):
        attn(changed, encoder_hidden_states=context)
    torch.testing.assert_close(other.sums[positions], expected)
    with pytest.raises(AuditorError, match="batch of 3 for 2 prompts"):
        with torch.inference_mode(), recording_cross_attention(unet, CrossAttentionRecorder(items)):
            attn(hidden[:3], encoder_hidden_states=context[:3])


def test_maps_keep_each_layers_row_major_layout_and_upsample_it():
    """A layer's positions are its grid in row-major order (as diffusers flattens it); rows stay rows."""
    import torch

    recorder = CrossAttentionRecorder(1)
    fine = torch.zeros(20, 24)
    fine[:, :6] = 1.0  # a left band on the latent grid
    coarse = torch.zeros(10, 12)
    coarse[:2, :] = 1.0  # a top band on the half grid
    recorder.sums = {20 * 24: fine.reshape(1, 1, -1), 10 * 12: coarse.reshape(1, 1, -1)}
    (found,) = recorder.maps(torch.ones(1, 1, 1), (20, 24), (40, 48))[:, 0].numpy()
    assert found.shape == (40, 48)
    # The band of the fine grid: the left quarter; the coarse one: the top fifth, each upsampled by 2 and 4.
    np.testing.assert_allclose(found[10:30, :10], 1.0)
    np.testing.assert_allclose(found[:6, 14:], 1.0)
    np.testing.assert_allclose(found[12:, 14:], 0.0)
    with pytest.raises(AuditorError, match="grid of a cross-attention layer with 7 positions"):
        recorder.sums = {7: torch.zeros(1, 1, 7)}
        recorder.maps(torch.ones(1, 1, 1), (20, 24), (40, 48))


def test_word_maps_are_image_sized_normalised_sums_of_their_tokens(backend, items, traced):
    tokenizer = backend.pipeline.tokenizer
    assert set(traced[0].word_maps) == {"a", "photo", "of", "pharmacist"}  # every word by default
    assert list(traced[1].word_maps) == ["smiling", "pharmacist"]  # the words asked for, lower-cased
    assert list(traced[2].word_maps) == ["photo"]
    _, token_maps = _token_maps(backend, items[:2])
    words = {word.text: word.positions for word in prompt_words(tokenizer, SMILING)}
    assert len(words["smiling"]) > 1  # a word of several BPE tokens
    for word in ("smiling", "pharmacist"):
        summed = token_maps[1, list(words[word])].sum(axis=0)
        expected = (summed - summed.min()) / (summed.max() - summed.min())
        found = traced[1].word_maps[word]
        assert found.shape == (HEIGHT, WIDTH) and found.dtype == np.float32
        assert found.min() == 0.0 and found.max() == 1.0
        np.testing.assert_allclose(found, expected, atol=1e-5)
    # "a" occurs twice in the prompt: its map sums both occurrences.
    positions_of_a = [p for w in prompt_words(tokenizer, PROMPT) if w.text == "a" for p in w.positions]
    summed = token_maps[0, positions_of_a].sum(axis=0)
    np.testing.assert_allclose(traced[0].word_maps["a"], (summed - summed.min()) / np.ptp(summed), atol=1e-5)


def test_prompt_words_follow_the_tokenizer(backend):
    tokenizer = backend.pipeline.tokenizer
    words = prompt_words(tokenizer, "A photo of a Pharmacist, smiling")
    assert [w.text for w in words] == ["a", "photo", "of", "a", "pharmacist", ",", "smiling"]
    ids = tokenizer("A photo of a Pharmacist, smiling").input_ids
    flat = [p for w in words for p in w.positions]
    assert flat == list(range(1, len(ids) - 1))  # every token between BOS and EOS, in order, once
    long = "a photo of " + "a nurse and " * 40 + "a doctor"
    tail = prompt_words(tokenizer, long)[-1]
    assert tail.text == "doctor" and tail.positions == ()  # truncated away at 77 tokens


def test_truncated_word_map_is_zero_and_unknown_word_is_an_error(backend):
    long = "a photo of a pharmacist " + " ".join(["and a nurse"] * 40) + " smiling"
    (traced,) = trace(backend, [GenerationItem(long, 0, 1)], words=[["smiling", "photo"]])
    assert not traced.word_maps["smiling"].any()
    assert traced.word_maps["photo"].max() == 1.0
    with pytest.raises(AuditorError, match=r"cannot map 'doctor': not a word of the prompt"):
        trace(backend, [GenerationItem(PROMPT, 0, 1)], words=[["doctor"]])
    with pytest.raises(AuditorError, match="2 word lists for 1 items"):
        trace(backend, [GenerationItem(PROMPT, 0, 1)], words=[None, None])


def test_original_processors_are_restored_also_after_a_failure(backend, items):
    import torch

    unet = backend.pipeline.unet
    before = dict(unet.attn_processors)
    trace(backend, items[:1])
    assert unet.attn_processors == before
    with pytest.raises(RuntimeError, match="boom"):
        with recording_cross_attention(unet, CrossAttentionRecorder(1)):
            assert unet.attn_processors != before
            raise RuntimeError("boom")
    assert unet.attn_processors == before
    with torch.inference_mode():  # and the pipeline still runs as before
        backend.pipeline(**{**backend.pipeline_arguments(items[:1]), "output_type": "latent"})


def test_trace_fingerprint_extends_the_backends(backend, tiny_tracing_models):
    assert trace_fingerprint(backend) != backend.cache_fingerprint()
    assert trace_fingerprint(_load(tiny_tracing_models)) == trace_fingerprint(backend)
    assert trace_fingerprint(_load(tiny_tracing_models, steps=3)) != trace_fingerprint(backend)


def test_pipelines_that_cannot_be_traced_are_one_line(backend, tiny_models):
    from types import SimpleNamespace

    with pytest.raises(AuditorError, match="needs a UNet pipeline with one CLIP text encoder"):
        trace(SimpleNamespace(pipeline=SimpleNamespace(unet=None), settings=backend.settings), [])
    # The regular tiny pipeline has cross-attention at one resolution only: traced all the same.
    plain = T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(steps=1))
    (traced,) = trace(plain, [GenerationItem(PROMPT, 0, 5)], words=[["pharmacist"]])
    assert traced.word_maps["pharmacist"].shape == (32, 32)


def test_fused_projections_are_undone_before_tracing(tiny_tracing_models, items, traced):
    """Fused QKV (a CUDA speed-up) hides to_q/to_k from the recorder: tracing unfuses and says so."""
    fused = _load(tiny_tracing_models)
    fused.pipeline.unet.fuse_qkv_projections()
    fused.settings = fused.settings.model_copy(update={"optimizations": ["fused_qkv", "sdpa"]})
    again = trace(fused, items, words=[None, ["smiling", "Pharmacist"], ["photo"]])
    assert fused.settings.optimizations == ["sdpa"]
    for one, other in zip(traced, again):
        assert set(one.word_maps) == set(other.word_maps)
        for word in one.word_maps:
            assert abs(one.word_maps[word] - other.word_maps[word]).max() < 1e-4
