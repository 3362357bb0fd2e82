"""The tiny random models: complete, reusable, deterministic, and loadable like hub checkpoints."""

from __future__ import annotations

import os

import pytest

from auditor.tiny import COMPLETE_MARKER, build_tiny_models


def _weights(folder) -> dict[str, bytes]:
    """Relative path -> bytes of every weight and tokenizer file under ``folder``."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.suffix in {".safetensors", ".json"} and path.is_file()
    }


def test_every_model_folder_is_complete(tiny_models):
    assert (tiny_models.t2i / "model_index.json").is_file()
    for component in ("unet", "vae", "text_encoder", "tokenizer", "scheduler"):
        assert (tiny_models.t2i / component).is_dir()
    for folder in (tiny_models.t2i, tiny_models.vqa, tiny_models.clip):
        assert (folder / COMPLETE_MARKER).is_file()
    for folder in (tiny_models.vqa, tiny_models.clip):
        assert {"config.json", "model.safetensors", "tokenizer.json", "processor_config.json"} <= {
            p.name for p in folder.iterdir()
        }


def test_building_again_reuses_the_finished_folders(tiny_models):
    weights = tiny_models.vqa / "model.safetensors"
    before = weights.stat().st_mtime_ns
    again = build_tiny_models(tiny_models.t2i.parent)
    assert again == tiny_models
    assert weights.stat().st_mtime_ns == before


def test_build_is_deterministic_and_redoes_an_interrupted_one(tiny_models, tmp_path):
    (tmp_path / "vqa").mkdir()
    (tmp_path / "vqa" / "half-written.bin").write_bytes(b"x")  # no completion marker: redone
    fresh = build_tiny_models(tmp_path)
    assert not (fresh.vqa / "half-written.bin").exists()
    for name in ("t2i", "vqa", "clip"):
        assert _weights(getattr(fresh, name)) == _weights(getattr(tiny_models, name)), name
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no staging folders left behind


def test_clip_loads_with_from_pretrained_and_embeds(tiny_models):
    import torch
    from PIL import Image
    from transformers import AutoProcessor, CLIPModel

    model = CLIPModel.from_pretrained(tiny_models.clip).eval()
    processor = AutoProcessor.from_pretrained(tiny_models.clip)
    image = Image.new("RGB", (50, 40), (200, 0, 0))
    inputs = processor(images=[image], text=["a photo", "a pharmacist"], padding=True, return_tensors="pt")
    assert inputs["pixel_values"].shape == (1, 3, 32, 32)
    with torch.inference_mode():
        logits = model(**inputs).logits_per_image
    assert logits.shape == (1, 2) and torch.isfinite(logits).all()


@pytest.mark.parametrize("text", ["a photo of a Pharmacist!", "ünïcode, digits 42 & symbols ~"])
def test_tokenizers_cover_any_text(tiny_models, text):
    """Byte-level vocabularies: no input falls back to the unknown token."""
    from transformers import AutoTokenizer

    clip = AutoTokenizer.from_pretrained(tiny_models.clip)
    ids = clip(text)["input_ids"]
    assert ids[0] == clip.bos_token_id and ids[-1] == clip.eos_token_id
    assert clip.eos_token_id not in ids[1:-1] and clip.unk_token_id not in ids[1:-1]
    opt = AutoTokenizer.from_pretrained(tiny_models.vqa)
    assert opt.unk_token_id not in opt(text)["input_ids"]
    assert opt.decode(opt(text, add_special_tokens=False)["input_ids"]) == text
