"""Per-word cross-attention maps of a diffusers UNet, recorded during the pipeline call that makes the images.

The paper's word attention (Wu et al., J. Imaging 2025, after DAAM): on every UNet
cross-attention layer (``attn2``) a wrapper runs the layer's own processor unchanged and
then adds softmax(QKᵀ/√d) per prompt token, from the layer's own Q and K, to sums over
heads, layers and denoising steps (:class:`CrossAttentionRecorder`); a word's map is the
sum of its tokens' maps, upsampled to the image size and normalised to [0, 1]
(:func:`word_maps`). :mod:`auditor.generation.tracing` runs the recording beside the
text-encoder and latent captures.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    import torch


class CrossAttentionRecorder:
    """Running sums of cross-attention probabilities per prompt token, for one pipeline call.

    Each recorded layer call adds softmax(QKᵀ/√d) of the conditional half of the batch,
    summed over heads, to a float32 accumulator of shape (items, tokens, positions) for the
    layer's spatial resolution: the sums over layers and steps are kept in place, never the
    per-step maps (Stable Diffusion 1.5 at 512 px: 4 resolutions, 5,440 positions x 77
    tokens, 1.7 MB per image). Upsampling is linear, so upsampling the per-resolution sums
    once at the end equals summing upsampled per-call maps. Every map counts all tokens
    (BOS, EOS and padding too): the softmax spreads attention over all of them, and the
    sum over tokens is then exactly the number of heads recorded, at every position.

    Q and K are the layer's own projections, taken from its ``to_q``/``to_k`` as its
    processor computed them (nothing is recomputed); the probabilities come from the
    layer's ``get_attention_scores`` (its scale, mask and softmax) in float32.

    Classifier-free guidance runs the UNet on [unconditional, conditional] halves (diffusers
    concatenates the negative prompt's embeddings first); only the conditional half, the
    prompt's own attention, is recorded. Without guidance the whole batch is conditional.
    """

    def __init__(self, items: int):
        self.items = items
        #: Sequence length (positions) of a layer's queries -> (items, tokens, positions) sums.
        self.sums: dict[int, torch.Tensor] = {}
        #: Attention heads summed so far over all recorded calls (per position, the token sums total this).
        self.heads = 0

    def record(self, attn: Any, query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor | None) -> None:
        """Add one call of the diffusers ``Attention`` layer ``attn``, from its projections (batch, length, width)."""
        batch, positions, _ = query.shape
        first = self._conditional_start(batch)
        if attention_mask is not None:
            mask = attn.prepare_attention_mask(attention_mask, key.shape[1], batch)
            attention_mask = mask[first * attn.heads :].float()
        query = attn.head_to_batch_dim(query[first:]).float()
        key = attn.head_to_batch_dim(key[first:]).float()
        probabilities = attn.get_attention_scores(query, key, attention_mask)  # (items*heads, positions, tokens)
        summed = probabilities.view(self.items, attn.heads, positions, -1).sum(dim=1).transpose(1, 2)
        if positions in self.sums:
            self.sums[positions].add_(summed)
        else:
            self.sums[positions] = summed.contiguous()
        self.heads += attn.heads

    def _conditional_start(self, batch: int) -> int:
        if batch == 2 * self.items:
            return self.items
        if batch == self.items:
            return 0
        raise AuditorError(
            f"cross-attention saw a batch of {batch} for {self.items} prompts; cannot tell the prompts' half"
        )

    @property
    def tokens(self) -> int:
        """Length of the token sequence the layers attended to (77 for CLIP text encoders)."""
        if not self.sums:
            raise _nothing_recorded()
        return next(iter(self.sums.values())).shape[1]

    def maps(self, weights: torch.Tensor, latent_size: tuple[int, int], size: tuple[int, int]) -> torch.Tensor:
        """(items, K, height, width) sums over layers of ``weights`` (items, K, tokens) times the token maps.

        Each resolution's sums are combined over tokens first (cheap, at low resolution),
        then upsampled bilinearly to ``size`` = (height, width) and added; ``latent_size``
        tells each layer's grid (the UNet halves the latent's sides, rounding up).
        """
        import torch
        import torch.nn.functional as F

        total = None
        for positions, sums in self.sums.items():
            rows, columns = _grid(positions, latent_size)
            combined = torch.bmm(weights.to(sums), sums).view(self.items, -1, rows, columns)
            upsampled = F.interpolate(combined, size=size, mode="bilinear", align_corners=False)
            total = upsampled if total is None else total.add_(upsampled)
        if total is None:
            raise _nothing_recorded()
        return total


def _nothing_recorded() -> AuditorError:
    return AuditorError("the pipeline ran no cross-attention layer, so there are no attention maps")


def _grid(positions: int, latent_size: tuple[int, int]) -> tuple[int, int]:
    """The (rows, columns) of a layer with ``positions`` queries: the latent grid halved (rounding up) until it fits."""
    rows, columns = latent_size
    while rows * columns > positions:
        rows, columns = -(-rows // 2), -(-columns // 2)
    if rows * columns != positions:
        raise AuditorError(
            f"cannot tell the grid of a cross-attention layer with {positions} positions for a {latent_size} latent"
        )
    return rows, columns


class _RecordingProcessor:
    """Runs the layer's own processor unchanged (so images are unchanged), then records its attention.

    Forward hooks on the layer's ``to_q`` and ``to_k`` keep their outputs of the current
    call in ``projections``.
    """

    def __init__(self, inner: Any, recorder: CrossAttentionRecorder):
        self.inner = inner
        self.recorder = recorder
        self.projections: dict[str, Any] = {}

    def __call__(
        self,
        attn: Any,
        hidden_states: Any,
        encoder_hidden_states: Any = None,
        attention_mask: Any = None,
        **kwargs: Any,
    ) -> Any:
        self.projections.clear()
        output = self.inner(attn, hidden_states, encoder_hidden_states, attention_mask, **kwargs)
        if encoder_hidden_states is not None:
            if set(self.projections) != {"query", "key"}:
                raise AuditorError(
                    f"cannot trace {type(self.inner).__name__}: it does not use the layer's to_q and to_k "
                    "(fused projections?)"
                )
            self.recorder.record(attn, self.projections["query"], self.projections["key"], attention_mask)
        self.projections.clear()
        return output

    def keep(self, name: str) -> Any:
        """A forward hook that keeps a projection's output under ``name``."""

        def hook(module: Any, args: Any, output: Any) -> None:
            self.projections[name] = output

        return hook


@contextmanager
def recording_cross_attention(unet: Any, recorder: CrossAttentionRecorder) -> Iterator[CrossAttentionRecorder]:
    """Record every cross-attention layer (``attn2``) of ``unet`` into ``recorder`` while the block runs.

    The original processors are put back and the hooks removed afterwards, also when the block fails.
    """
    originals = dict(unet.attn_processors)
    layers = {f"{name}.processor": module for name, module in unet.named_modules() if name.endswith("attn2")}
    if not layers:
        raise AuditorError("the pipeline's UNet has no cross-attention layers (attn2) to trace")
    wrapped = {name: _RecordingProcessor(originals[name], recorder) for name in layers}
    handles = []
    try:
        for name, layer in layers.items():
            handles.append(layer.to_q.register_forward_hook(wrapped[name].keep("query")))
            handles.append(layer.to_k.register_forward_hook(wrapped[name].keep("key")))
        unet.set_attn_processor({**originals, **wrapped})
        yield recorder
    finally:
        unet.set_attn_processor(dict(originals))
        for handle in handles:
            handle.remove()


def word_maps(
    recorder: CrossAttentionRecorder,
    words: Sequence[dict[str, tuple[int, ...]]],
    latent_size: tuple[int, int],
    size: tuple[int, int],
) -> list[dict[str, np.ndarray]]:
    """Per item, word -> its image-sized attention map normalised to [0, 1] (min-max, as DAAM).

    ``words[i]`` gives item i's words and their token positions. A map without contrast
    (a word with no tokens left after truncation) is all zeros.
    """
    import torch

    names = [list(chosen) for chosen in words]
    weights = torch.zeros(recorder.items, max(map(len, names), default=0), recorder.tokens)
    for i, chosen in enumerate(words):
        for k, positions in enumerate(chosen.values()):
            weights[i, k, list(positions)] = 1.0
    maps = recorder.maps(weights, latent_size, size)
    low = maps.amin(dim=(-2, -1), keepdim=True)
    spread = maps.amax(dim=(-2, -1), keepdim=True) - low
    normalised = torch.where(spread > 0, (maps - low) / spread.clamp_min(torch.finfo(maps.dtype).tiny), 0.0)
    array = normalised.cpu().numpy()
    return [{name: array[i, k] for k, name in enumerate(item_names)} for i, item_names in enumerate(names)]
