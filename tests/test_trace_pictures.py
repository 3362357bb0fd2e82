"""What a trace run stores and draws: traced images in the cache (8-bit maps), packed masks, triplet pictures."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from auditor.core.errors import AuditorError
from auditor.executors.generation import png_bytes
from auditor.generation.base import GeneratedPicture
from auditor.generation.tracing import PromptEncoding, TracedPicture
from auditor.reporting.overlays import GAP, OPACITY, heat_colours, overlay, triplet_picture
from auditor.studies.grounding_stage import _pack_masks, _unpack_masks
from auditor.studies.tracing_stage import TraceEntry


def test_a_trace_entry_round_trips_through_bytes_with_8_bit_maps():
    image = Image.fromarray(np.arange(5 * 4 * 3, dtype=np.uint8).reshape(4, 5, 3), "RGB")
    heat = np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5)
    traced = TracedPicture(
        picture=GeneratedPicture(image, flagged_nsfw=True),
        encoding=PromptEncoding(eos=np.array([1.5, -2.0], np.float32), mean=np.array([0.25, 3.0], np.float32)),
        latent=np.arange(8, dtype=np.float32).reshape(2, 2, 2),
        word_maps={"person": heat, "dog": np.zeros((4, 5), np.float32)},
    )
    entry = TraceEntry.from_bytes(TraceEntry.from_traced(traced, png_bytes(image)).to_bytes())
    assert entry.flagged_nsfw and np.array_equal(np.asarray(entry.image()), np.asarray(image))
    assert np.array_equal(entry.eos, traced.encoding.eos) and np.array_equal(entry.latent, traced.latent)
    assert entry.words == ["person", "dog"]
    assert np.array_equal(entry.word_map("person"), np.round(heat * 255).astype(np.float64) / 255)  # 8-bit
    assert np.abs(entry.word_map("person") - heat).max() <= 0.5 / 255 + 1e-7
    assert entry.word_map("bike") is None


def test_masks_pack_into_bits_and_back():
    masks = np.random.default_rng(0).random((3, 7, 5)) > 0.5
    assert np.array_equal(_unpack_masks(_pack_masks(masks)), masks)
    assert _unpack_masks(_pack_masks(np.zeros((0, 7, 5), bool))).shape == (0, 7, 5)


def test_heat_colours_and_overlay_by_hand():
    colours = heat_colours(np.array([[0.0, 1 / 3, 2 / 3, 1.0]]))
    assert colours[0].tolist() == [[40, 60, 200], [0, 200, 220], [250, 220, 0], [220, 20, 20]]
    grey = Image.new("RGB", (2, 1), (100, 100, 100))
    blended = np.asarray(overlay(grey, np.array([[0.0, 1.0]])))
    assert blended[0, 0].tolist() == [100, 100, 100]  # no attention: the image as it is
    assert blended[0, 1].tolist() == np.round(100 * (1 - OPACITY) + np.array([220, 20, 20]) * OPACITY).tolist()
    with pytest.raises(AuditorError, match="does not fit"):
        overlay(grey, np.zeros((2, 2)))


def test_a_triplet_picture_has_the_images_on_top_and_their_overlays_below():
    images = [Image.new("RGB", (6, 4), colour) for colour in ("red", "green", "blue")]
    maps = [np.ones((4, 6)), None, np.zeros((4, 6))]
    picture = np.asarray(triplet_picture(images, maps))
    assert picture.shape == (2 * 4 + GAP, 3 * 6 + 2 * GAP, 3)
    for column, image in enumerate(images):
        x = column * (6 + GAP)
        assert np.array_equal(picture[:4, x : x + 6], np.asarray(image))
    assert np.array_equal(picture[4 + GAP :, 6 + GAP : 12 + GAP], np.asarray(images[1]))  # no map: plain image
    assert np.array_equal(picture[4 + GAP :, 2 * (6 + GAP) :], np.asarray(images[2]))  # zero attention
    assert not np.array_equal(picture[4 + GAP :, :6], np.asarray(images[0]))  # full attention: coloured
    assert (picture[4 : 4 + GAP] == 255).all()  # white gap between the rows
    with pytest.raises(AuditorError, match="one map"):
        triplet_picture(images, maps[:2])
