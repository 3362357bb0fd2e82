"""Text-to-image backends: diffusers on the tiny pipeline, image folders, the OpenAI Images API."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError

from auditor.core.errors import AuditorError, BackendError
from auditor.core.fingerprint import folder_fingerprint
from auditor.generation.base import GenerationItem
from auditor.generation.diffusers_backend import CUT_PROMPT_LOG_LINES
from auditor.generation.registry import T2I_BACKENDS
from auditor.records import GenerationSettings, ModelRef, load_record
from tests.clitools import run_auditor
from tests.fake_openai import FAKE_API_KEY, http_error, png_base64

PROMPT = "a photo of a pharmacist"
OTHER = "a photo of a female pharmacist"


def _pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image, dtype=np.float32)


# --------------------------------------------------------------------------- diffusers


@pytest.fixture(scope="module")
def t2i(tiny_models):
    """The tiny pipeline through the registry, two denoising steps."""
    return T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(steps=2, batch_size=4))


def test_diffusers_records_what_ran(t2i, tiny_models):
    assert t2i.seeded is True
    assert t2i.ref.backend == "diffusers" and t2i.ref.model_id == str(tiny_models.t2i)
    assert t2i.ref.revision is None  # a plain folder, not a hub snapshot
    assert t2i.ref.fingerprint == folder_fingerprint(tiny_models.t2i)
    assert (t2i.ref.dtype, t2i.ref.device) == ("float32", "cpu")
    # Defaults resolved from the pipeline, so the record says what actually ran.
    assert type(t2i.pipeline.scheduler).__name__ == t2i.settings.scheduler == "PNDMScheduler"
    assert (t2i.settings.steps, t2i.settings.guidance_scale) == (2, 7.5)
    assert (t2i.settings.width, t2i.settings.height) == (32, 32)


def test_diffusers_paired_seeds_are_deterministic_and_batch_invariant(t2i):
    batch = [GenerationItem(PROMPT, 0, 11), GenerationItem(OTHER, 0, 11), GenerationItem(PROMPT, 1, 12)]
    pictures = t2i.generate(batch)
    assert [p.image.size for p in pictures] == [(32, 32)] * 3
    assert not any(p.flagged_nsfw for p in pictures)
    alone = t2i.generate([GenerationItem(PROMPT, 1, 12)])[0]
    np.testing.assert_allclose(_pixels(alone.image), _pixels(pictures[2].image), atol=2)
    again = t2i.generate([GenerationItem(PROMPT, 0, 11)])[0]
    np.testing.assert_allclose(_pixels(again.image), _pixels(pictures[0].image), atol=2)
    # Another seed or another prompt gives another image (beyond the tolerance above).
    assert np.abs(_pixels(pictures[0].image) - _pixels(pictures[2].image)).max() > 2
    assert np.abs(_pixels(pictures[0].image) - _pixels(pictures[1].image)).max() > 2


def test_diffusers_one_pipeline_call_per_batch(tiny_models):
    backend = T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(steps=1, batch_size=2))
    decoded = []  # the VAE decodes each pipeline call's latents once, as one batch
    backend.pipeline.vae.decoder.register_forward_hook(lambda module, args, output: decoded.append(len(args[0])))
    pictures = backend.generate([GenerationItem(PROMPT, i, i) for i in range(5)])
    assert len(pictures) == 5 and decoded == [2, 2, 1]


def test_diffusers_size_scheduler_and_negative_prompt_options(t2i, tiny_models):
    settings = GenerationSettings(
        steps=2, width=48, height=40, scheduler="DPMSolverMultistepScheduler", negative_prompt="blurry"
    )
    backend = T2I_BACKENDS.load(str(tiny_models.t2i), settings=settings)  # a bare pipeline folder works too
    assert type(backend.pipeline.scheduler).__name__ == backend.settings.scheduler == "DPMSolverMultistepScheduler"
    picture = backend.generate([GenerationItem(PROMPT, 0, 11)])[0]
    assert picture.image.size == (48, 40)
    assert backend.cache_fingerprint() != t2i.cache_fingerprint()


def test_diffusers_fingerprint_is_stable_and_follows_image_changing_settings(t2i, tiny_models):
    def fingerprint(**changes) -> str:
        settings = GenerationSettings(steps=2, batch_size=4).model_copy(update=changes)
        return T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=settings).cache_fingerprint()

    assert fingerprint() == t2i.cache_fingerprint()
    assert fingerprint(batch_size=1) == t2i.cache_fingerprint()  # batching does not change images
    # Naming the default scheduler or size explicitly is the same run.
    assert fingerprint(scheduler="PNDMScheduler", width=32, height=32, guidance_scale=7.5) == t2i.cache_fingerprint()
    changed = {fingerprint(steps=3), fingerprint(guidance_scale=3.0), fingerprint(negative_prompt="text")}
    assert len(changed) == 3 and t2i.cache_fingerprint() not in changed


def test_folder_fingerprint_reads_config_and_weight_contents(tiny_models, tmp_path):
    copy = tmp_path / "clip"
    shutil.copytree(tiny_models.clip, copy)
    reference = folder_fingerprint(tiny_models.clip)
    assert folder_fingerprint(copy) == reference  # content, not location
    (copy / "README.md").write_text("notes")
    (copy / ".cache").mkdir()
    (copy / ".cache" / "x.json").write_text("{}")
    assert folder_fingerprint(copy) == reference  # docs and hidden files do not count
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "projection_dim": 8}))
    changed_config = folder_fingerprint(copy)
    assert changed_config != reference
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, one byte of one tensor changed
    weights.write_bytes(bytes(data))
    assert folder_fingerprint(copy) not in {reference, changed_config}


def test_folder_fingerprint_counts_every_file_and_follows_linked_folders(tiny_models, tmp_path):
    pipeline = tmp_path / "pipeline"
    shutil.copytree(tiny_models.t2i, pipeline)
    reference = folder_fingerprint(pipeline)
    (pipeline / "tokenizer" / "chat_template.jinja").write_text("{{ messages }}")  # no known suffix: counted
    templated = folder_fingerprint(pipeline)
    assert templated != reference
    (tmp_path / "unets").mkdir()
    shutil.move(pipeline / "unet", tmp_path / "unets" / "u1")
    shutil.copytree(tmp_path / "unets" / "u1", tmp_path / "unets" / "u2")
    weights = next((tmp_path / "unets" / "u2").glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    (pipeline / "unet").symlink_to(tmp_path / "unets" / "u1", target_is_directory=True)
    assert folder_fingerprint(pipeline) == templated  # a linked folder counts as its contents
    (pipeline / "unet").unlink()
    (pipeline / "unet").symlink_to(tmp_path / "unets" / "u2", target_is_directory=True)
    assert folder_fingerprint(pipeline) not in {reference, templated}
    (pipeline / "vae" / "loop").symlink_to(pipeline, target_is_directory=True)  # a link back up: read once
    assert folder_fingerprint(pipeline) != templated


def test_diffusers_sides_the_pipeline_cannot_make_are_one_line(t2i, tiny_models):
    """Sides are multiples of 8 (the pipelines' own check, whatever the VAE: the tiny one's factor is less) and of a
    larger VAE factor."""
    from types import SimpleNamespace

    from auditor.core.registry import parse_spec
    from auditor.generation.diffusers_backend import _check_sides

    assert 8 % t2i.pipeline.vae_scale_factor == 0
    with pytest.raises(ValidationError, match="multiple of 8"):
        GenerationSettings(width=30)
    spec = f"diffusers:{tiny_models.t2i}"
    with pytest.raises(AuditorError) as caught:  # a record's settings are not validated again: the load checks too
        T2I_BACKENDS.load(spec, settings=GenerationSettings.model_construct(width=36, height=32))
    assert str(caught.value) == f"--width 36: {spec} makes images whose sides are multiples of 8"
    sixteen = SimpleNamespace(vae_scale_factor=16)
    with pytest.raises(AuditorError, match="--height 24: .* makes images whose sides are multiples of 16"):
        _check_sides(sixteen, GenerationSettings(height=24), parse_spec(spec))
    _check_sides(sixteen, GenerationSettings(width=32, height=48), parse_spec(spec))


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("foo", "--device foo: not a torch device (cpu, cuda, cuda:N, mps)"),
        ("meta", "--device meta: auditor runs on cpu, cuda or mps"),
        ("cuda", "sees no CUDA device"),
    ],
)
def test_a_device_this_torch_cannot_use_is_one_line(tiny_models, device, message):
    import torch

    from auditor.core.devices import check_device
    from auditor.core.weights import LoadOptions

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert check_device("cpu") == "cpu"
    with pytest.raises(AuditorError, match=message.replace("(", r"\(").replace(")", r"\)")):
        T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(), options=LoadOptions(device=device))


def test_a_device_this_machine_lacks_is_refused_before_a_run_folder_unless_ray_workers_load_the_models(tmp_path):
    import torch

    from auditor.executors import check_placement

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    check_placement("ray", "cuda")  # a Ray worker may have the GPU this driver lacks: checked where it loads
    check_placement("sequential", None)
    with pytest.raises(AuditorError, match="^--device cuda: this torch"):
        check_placement("overlapped", "cuda")
    result = run_auditor("prompt", "a photo of a nurse", "--llm", "offline", "--device", "cuda", process=True)
    assert result.returncode == 2 and result.stderr.startswith("error: --device cuda: this torch (")
    assert result.stderr.strip().endswith("sees no CUDA device") and not (tmp_path / "runs").exists()


def test_diffusers_unknown_scheduler_lists_the_compatible_ones(tiny_models):
    with pytest.raises(AuditorError, match=r"unknown scheduler 'NoSuchScheduler': use one of .*EulerDiscreteScheduler"):
        T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(scheduler="NoSuchScheduler"))


def test_a_scheduler_whose_package_is_missing_names_the_package(tiny_models):
    from importlib.util import find_spec

    if find_spec("torchsde") is not None:
        pytest.skip("torchsde is installed here")
    needs = "the scheduler DPMSolverSDEScheduler needs torchsde, which is not installed: pip install torchsde"
    with pytest.raises(AuditorError, match=needs):
        T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(scheduler="DPMSolverSDEScheduler"))
    result = run_auditor("prompt", "x", "--llm", "offline", "--scheduler", "DPMSolverSDEScheduler", process=True)
    assert result.returncode == 2 and result.stderr.strip() == f"error: {needs}"


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("auditor-tests/no-such-model", "not in the local Hugging Face cache and the hub is unreachable"),
        ("./no-such-folder", "no such folder"),
    ],
)
def test_diffusers_missing_weights_is_one_line_naming_the_model(model, expected):
    with pytest.raises(BackendError) as caught:
        T2I_BACKENDS.load(f"diffusers:{model}", settings=GenerationSettings())
    message = str(caught.value)
    assert "\n" not in message
    assert f"cannot load text-to-image model {model!r}" in message and expected in message
    assert "--t2i diffusers:/path/to/local/copy" in message
    if "hub" in expected:  # the download command the installed huggingface_hub has (1.0 has no huggingface-cli)
        from auditor.core.weights import download_command

        assert f"({download_command()} {model})" in message


@pytest.mark.parametrize(("installed", "command"), [("2.4.0", "hf download"), ("0.34.1", "hf download"),
                                                    ("0.26.2", "huggingface-cli download")])  # fmt: skip
def test_the_download_command_suggested_is_the_installed_hubs(installed, command, monkeypatch):
    from auditor.core import weights

    monkeypatch.setattr("importlib.metadata.version", lambda name: installed)
    weights.download_command.cache_clear()
    try:
        assert weights.download_command() == command
    finally:
        weights.download_command.cache_clear()


def test_a_resume_onto_the_images_api_refuses_the_runs_own_settings_it_cannot_take(tiny_models, monkeypatch):
    """--resume may point a run at another --t2i, but the run keeps its settings: ones the new model cannot take
    are one line, before anything runs, and the run itself is left as it was."""
    made = run_auditor(
        "prompt", "a photo of a nurse", "--t2i", f"diffusers:{tiny_models.t2i}", "--llm", "offline", "--embedder",
        "none", "--axes", "gender", "--images", "2", "--steps", "2", "--vqa", f"blip2:{tiny_models.vqa}",
        "--name", "r", "--quiet",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    moved = run_auditor("prompt", "--resume", "r", "--t2i", "openai:dall-e-3", process=True)
    assert moved.returncode == 2 and moved.stderr.startswith("error: --t2i openai:dall-e-3 takes no steps")
    assert len(moved.stderr.splitlines()) == 1
    assert load_record(Path("runs") / "r" / "record.json").status == "completed"


def test_a_pipeline_folder_whose_component_lacks_its_weights_names_the_component_in_one_line(tiny_models, tmp_path):
    import shutil

    copy = tmp_path / "t2i"
    shutil.copytree(tiny_models.t2i, copy)
    for weights in (copy / "unet").glob("*.safetensors"):
        weights.unlink()
    result = run_auditor(
        "prompt", "a photo of a nurse", "--t2i", f"diffusers:{copy}", "--llm", "offline", "--embedder", "none",
        "--axes", "gender", "--images", "2", "--vqa", f"blip2:{tiny_models.vqa}", process=True,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()  # the libraries' own error lines are not printed beside it
    assert line.startswith(
        f"error: cannot load text-to-image model '{copy}': its unet/ folder has no weights (no .safetensors or .bin "
        "file)"
    )


def test_diffusers_folder_of_another_kind_is_one_line(tiny_models):
    with pytest.raises(BackendError, match="model_index.json") as caught:
        T2I_BACKENDS.load(f"diffusers:{tiny_models.clip}", settings=GenerationSettings())
    assert "\n" not in str(caught.value)


def test_diffusers_hub_cache_snapshot_gives_the_revision(tiny_models, tmp_path, monkeypatch):
    """A hub id found in the local cache loads offline and is identified by the snapshot's commit."""
    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--auditor-tests--tiny-sd"
    shutil.copytree(tiny_models.t2i, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    backend = T2I_BACKENDS.load("diffusers:auditor-tests/tiny-sd", settings=GenerationSettings(steps=1))
    assert backend.ref.model_id == "auditor-tests/tiny-sd"
    assert backend.ref.revision == commit
    assert backend.ref.fingerprint == folder_fingerprint(repo / "snapshots" / commit)  # its contents, not its name
    config = repo / "snapshots" / commit / "scheduler" / "scheduler_config.json"
    config.write_text(config.read_text().replace('"beta_end": 0.012', '"beta_end": 0.02'))  # edited in place
    edited = T2I_BACKENDS.load("diffusers:auditor-tests/tiny-sd", settings=GenerationSettings(steps=1))
    assert edited.ref.revision == commit and edited.ref.fingerprint != backend.ref.fingerprint


def test_diffusers_safety_checker_flags_are_reported(tiny_models, tmp_path):
    """A pipeline whose safety checker fires marks those pictures ``flagged_nsfw``."""
    from diffusers import StableDiffusionPipeline
    from diffusers.pipelines.stable_diffusion.safety_checker import (
        StableDiffusionSafetyChecker,
    )
    from transformers import CLIPConfig, CLIPImageProcessor

    checker = StableDiffusionSafetyChecker(
        CLIPConfig(
            text_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2},
            vision_config={
                "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                "image_size": 32, "patch_size": 8,
            },
            projection_dim=8,
        )
    )
    checker.concept_embeds_weights.data.fill_(-10.0)  # every image scores above every threshold
    feature_extractor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    pipeline = StableDiffusionPipeline.from_pretrained(
        tiny_models.t2i, safety_checker=checker, feature_extractor=feature_extractor, requires_safety_checker=True
    )
    pipeline.save_pretrained(tmp_path / "checked")
    backend = T2I_BACKENDS.load(f"diffusers:{tmp_path / 'checked'}", settings=GenerationSettings(steps=1))
    pictures = backend.generate([GenerationItem(PROMPT, 0, 1), GenerationItem(PROMPT, 1, 2)])
    assert [p.flagged_nsfw for p in pictures] == [True, True]
    assert all(_pixels(p.image).max() == 0 for p in pictures)  # blacked out by the checker


# --------------------------------------------------------------------------- folder


def _image(path: Path, color: tuple[int, int, int], size: int = 8) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (size, size), color).save(path)
    return path


def test_folder_manifest_serves_the_ith_file_of_each_prompt(tmp_path):
    root = tmp_path / "images"
    _image(root / "b.png", (0, 255, 0))
    _image(root / "a.png", (255, 0, 0))
    _image(root / "sub" / "c.jpg", (0, 0, 255))
    manifest = json.dumps({PROMPT: ["a.png", "b.png"], OTHER: ["sub/c.jpg"]})
    (root / "manifest.json").write_text("\ufeff" + manifest, encoding="utf-8")  # as Windows editors save it
    backend = T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings())
    assert backend.seeded is False and backend.ref.backend == "folder"
    shouted = "A Photo of a  Female Pharmacist!"  # matched by slug
    items = [GenerationItem(PROMPT, 1, 0), GenerationItem(shouted, 0, 0), GenerationItem(PROMPT, 0, 5)]
    pictures = backend.generate(items)
    assert pictures[0].image.getpixel((0, 0)) == (0, 255, 0)  # manifest order, not name order
    assert pictures[2].image.getpixel((0, 0)) == (255, 0, 0)
    assert pictures[1].image.getpixel((0, 0))[2] > 200  # JPEG is lossy
    assert backend.cache_fingerprint() == backend.ref.fingerprint


def test_folder_yaml_manifest_list_form(tmp_path):
    root = tmp_path / "images"
    _image(root / "x.png", (1, 2, 3))
    (root / "manifest.yaml").write_text(f"\ufeff- prompt: {PROMPT}\n  files: [x.png]\n", encoding="utf-8")
    backend = T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings())
    assert backend.generate([GenerationItem(PROMPT, 0, 0)])[0].image.getpixel((0, 0)) == (1, 2, 3)


def test_folder_per_prompt_by_slug_or_prompt_txt(tmp_path):
    from auditor.core.store import slugify

    root = tmp_path / "images"
    _image(root / slugify(PROMPT) / "002.png", (0, 0, 9))
    _image(root / slugify(PROMPT) / "001.png", (0, 0, 1))
    _image(root / "set-b" / "img.png", (7, 7, 7))
    (root / "set-b" / "prompt.txt").write_text("\ufeff" + OTHER + "\n", encoding="utf-8")  # a byte-order mark: not text
    backend = T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings())
    items = [GenerationItem(PROMPT, 0, 0), GenerationItem(PROMPT, 1, 0), GenerationItem(OTHER, 0, 0)]
    pictures = backend.generate(items)
    assert [p.image.getpixel((0, 0)) for p in pictures] == [(0, 0, 1), (0, 0, 9), (7, 7, 7)]  # sorted by name


def test_folder_lists_every_missing_or_unreadable_image_in_one_error(tmp_path):
    root = tmp_path / "images"
    _image(root / "ok.png", (0, 0, 0))
    (root / "notes.png").write_text("not an image")
    (root / "manifest.json").write_text(
        json.dumps({PROMPT: ["ok.png", "gone-1.png", "notes.png"], OTHER: ["gone-2.png"]})
    )
    with pytest.raises(AuditorError) as caught:
        T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings())
    message = str(caught.value)
    assert "\n" not in message and "3 problem(s)" in message
    for expected in ("missing gone-1.png", "missing gone-2.png", "not a readable image: notes.png"):
        assert expected in message


def test_folder_per_prompt_non_image_file_is_an_error(tmp_path):
    root = tmp_path / "images"
    _image(root / "a-photo" / "1.png", (0, 0, 0))
    (root / "a-photo" / "readme.txt").write_text("hello")
    with pytest.raises(AuditorError, match=r"not a readable image: a-photo/readme.txt"):
        T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings())


def test_folder_unknown_prompt_or_too_few_images_is_one_error(tmp_path):
    root = tmp_path / "images"
    _image(root / "a.png", (0, 0, 0))
    (root / "manifest.json").write_text(json.dumps({PROMPT: ["a.png"]}))
    backend = T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings())
    with pytest.raises(AuditorError) as caught:
        backend.generate([GenerationItem(PROMPT, 1, 0), GenerationItem("a photo of a chef", 0, 0)])
    message = str(caught.value)
    assert "has 1 images, image 2 was asked for" in message and "no images for prompt 'a photo of a chef'" in message


def test_a_folder_lacking_images_says_to_add_them_and_resume_and_the_resume_then_completes(tiny_models, tmp_path):
    """A run that asks a folder for more images than it has stops (exit 2, kept failed) saying what lets it go on;
    once the images are added, ``--resume`` reads the changed folder and completes."""
    plan = run_auditor("plan", PROMPT, "--llm", "offline", "--max-axes", "1", "--max-counterfactuals", "2", "--json")
    assert plan.returncode == 0, plan.stderr
    prompts = [PROMPT, *(cf for axis in json.loads(plan.stdout)["axes"] for cf in axis["counterfactuals"])]
    root = tmp_path / "images"

    def write_folder(images: int) -> None:
        manifest = {}
        for number, prompt in enumerate(prompts):
            manifest[prompt] = [_image(root / f"{number}-{i}.png", (40 * number, 60 * i, 0)).name for i in range(images)]
        (root / "manifest.json").write_text(json.dumps(manifest))

    write_folder(1)
    args = ["--llm", "offline", "--t2i", f"folder:{root}", "--vqa", f"blip2:{tiny_models.vqa}", "--embedder", "none"]
    short = run_auditor("prompt", PROMPT, *args, "--images", "2", "--max-axes", "1", "--max-counterfactuals", "2",
                        "--name", "short", "--quiet")  # fmt: skip
    kept = tmp_path / "runs" / "short"
    assert short.returncode == 2 and len(short.stderr.strip().splitlines()) == 1
    assert "has 1 images, image 2 was asked for" in short.stderr
    assert (
        f"(run kept in {kept}; add the missing images to the folder, then continue it with --resume {kept}; "
        "or start a new run that asks only for images the folder has)"
    ) in short.stderr
    write_folder(2)
    resumed = run_auditor("prompt", "--resume", "short", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    record = json.loads((kept / "record.json").read_text())
    assert record["status"] == "completed" and [len(s["images"]) for s in record["prompt_sets"]] == [2, 2, 2]
    # options that make images do not apply to images made already: said, and left out of the record
    again = run_auditor("prompt", PROMPT, *args, "--images", "2", "--max-axes", "1", "--max-counterfactuals", "2",
                        "--steps", "7", "--negative-prompt", "blurry", "--name", "steps")  # fmt: skip
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stderr.split())
    assert f"--steps, --negative-prompt are not used: folder:{root} does not make its images with them" in said
    generation = json.loads((tmp_path / "runs" / "steps" / "record.json").read_text())["config"]["generation"]
    assert generation["steps"] is None and generation["negative_prompt"] is None


def test_folder_fingerprint_follows_image_contents(tmp_path):
    root = tmp_path / "images"
    _image(root / "a.png", (0, 0, 0))
    (root / "manifest.json").write_text(json.dumps({PROMPT: ["a.png"]}))
    before = T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings()).cache_fingerprint()
    assert T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings()).cache_fingerprint() == before
    _image(root / "a.png", (0, 0, 1))
    assert T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings()).cache_fingerprint() != before


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda root: None, "does not exist"),
        (lambda root: root.mkdir(), "no manifest.json / manifest.yaml / manifest.yml and no sub-folder"),
        (lambda root: (root.mkdir(), (root / "manifest.json").write_text("{broken")), "cannot read"),
        (lambda root: (root.mkdir(), (root / "manifest.json").write_text('[{"prompt": "p"}]')), "entry 1 needs"),
    ],
)
def test_folder_bad_layouts_are_one_line(tmp_path, setup, expected):
    root = tmp_path / "images"
    setup(root)
    with pytest.raises(AuditorError, match=expected) as caught:
        T2I_BACKENDS.load(f"folder:{root}", settings=GenerationSettings())
    assert "\n" not in str(caught.value)


# --------------------------------------------------------------------------- OpenAI Images API

def test_openai_images_one_request_per_image(fake_openai):
    fake_openai.image_replies(png_base64(rgb=(10, 20, 30)), png_base64(rgb=(40, 50, 60)))
    backend = T2I_BACKENDS.load("openai:dall-e-3", settings=GenerationSettings(width=1024, height=1792, batch_size=1))
    assert backend.seeded is False and backend.ref.model_id == "dall-e-3"
    assert backend.ref.service == fake_openai.base_url  # which server made the images is recorded
    pictures = backend.generate([GenerationItem(PROMPT, 0, 0), GenerationItem(PROMPT, 1, 1)])
    assert [p.image.getpixel((0, 0)) for p in pictures] == [(10, 20, 30), (40, 50, 60)]
    sent = [r.json for r in fake_openai.image_requests()]
    assert sent == [
        {"model": "dall-e-3", "prompt": PROMPT, "n": 1, "size": "1024x1792", "response_format": "b64_json"}
    ] * 2
    assert FAKE_API_KEY not in backend.ref.model_dump_json() + backend.cache_fingerprint()


def test_openai_images_gpt_image_models_get_no_response_format(fake_openai):
    fake_openai.image_replies(png_base64())
    backend = T2I_BACKENDS.load("openai:gpt-image-1", settings=GenerationSettings())
    backend.generate([GenerationItem(PROMPT, 0, 0)])
    assert fake_openai.image_requests()[0].json == {"model": "gpt-image-1", "prompt": PROMPT, "n": 1}


def test_openai_images_retries_a_server_error(fake_openai):
    fake_openai.image_replies(http_error(500, retry_after_ms=5), png_base64(rgb=(1, 2, 3)))
    backend = T2I_BACKENDS.load("openai:dall-e-3", settings=GenerationSettings())
    assert backend.generate([GenerationItem(PROMPT, 0, 0)])[0].image.getpixel((0, 0)) == (1, 2, 3)
    assert len(fake_openai.image_requests()) == 2


def test_openai_images_persistent_failure_is_bounded_and_one_line(fake_openai):
    from auditor.core.registry import parse_spec
    from auditor.generation.openai_images import load

    fake_openai.image_replies(*[http_error(503, "overloaded", retry_after_ms=5)] * 3)
    backend = load(parse_spec("openai:dall-e-3"), GenerationSettings(), max_retries=2)
    with pytest.raises(BackendError) as caught:
        backend.generate([GenerationItem(PROMPT, 0, 0)])
    message = str(caught.value)
    assert "\n" not in message and "HTTP 503" in message and "3 tries" in message and "overloaded" in message
    assert len(fake_openai.image_requests()) == 3 and FAKE_API_KEY not in message


def test_openai_images_content_policy_refusal_is_a_flagged_black_image(fake_openai):
    refusal = {"error": {"message": "rejected by the safety system", "type": "invalid_request_error",
                         "code": "content_policy_violation", "param": None}}
    fake_openai.image_replies((400, refusal), png_base64())
    backend = T2I_BACKENDS.load("openai:dall-e-3", settings=GenerationSettings(width=16, height=16, batch_size=1))
    refused, fine = backend.generate([GenerationItem(PROMPT, 0, 0), GenerationItem(PROMPT, 1, 0)])
    assert refused.flagged_nsfw and refused.image.size == (16, 16) and refused.image.getbbox() is None
    assert not fine.flagged_nsfw


def test_openai_images_bad_request_is_not_retried(fake_openai):
    fake_openai.image_replies(http_error(400, "size must be one of 1024x1024, ..."))
    backend = T2I_BACKENDS.load("openai:dall-e-3", settings=GenerationSettings(width=16, height=16))
    with pytest.raises(BackendError, match=r"HTTP 400 .*size must be one of"):
        backend.generate([GenerationItem(PROMPT, 0, 0)])
    assert len(fake_openai.image_requests()) == 1


def test_openai_images_refuses_settings_it_cannot_honour_and_a_missing_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(AuditorError, match="takes no steps, negative_prompt"):
        T2I_BACKENDS.load("openai:dall-e-3", settings=GenerationSettings(steps=30, negative_prompt="x"))
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(AuditorError, match="OPENAI_API_KEY is not set"):
        T2I_BACKENDS.load("openai:dall-e-3", settings=GenerationSettings())


def test_an_openai_model_without_a_key_is_one_line_before_any_run_folder(tmp_path):
    for command in (["prompt", "a photo of a nurse", "--llm", "offline"], ["t2iat", "run", "flowers-insects"]):
        result = run_auditor(*command, "--t2i", "openai:dall-e-3", process=True)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("error: OPENAI_API_KEY is not set") and len(result.stderr.splitlines()) == 1
        assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["prompt", "a photo of a nurse", "--llm", "offline"],
        ["batch", "prompts.txt", "--llm", "offline"],
        ["t2iat", "run", "flowers-insects"],
        ["explore", "--topic", "people at work", "--llm", "offline"],
        ["amplification", "run", "--captions", "prompts.txt", "--occupation", "nurse"],
    ],
)
def test_settings_the_images_api_cannot_take_are_one_line_before_any_run_folder(tmp_path, monkeypatch, command):
    """A run keeps its settings, so one made for them could only fail again on --resume."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "prompts.txt").write_text("a photo of a nurse\na photo of a chef\n")
    monkeypatch.chdir(tmp_path)
    result = run_auditor(*command, "--t2i", "openai:dall-e-3", "--steps", "10", process=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: --t2i openai:dall-e-3 takes no steps")
    assert len(result.stderr.splitlines()) == 1
    assert "--resume" not in result.stderr and not (tmp_path / "runs").exists()


def test_a_run_names_every_prompt_the_folder_lacks_before_it_reads_the_first_batch(tmp_path):
    """The generate stage checks all the images it is to make at once: batches of one still give one error."""
    from auditor.core.cache import ContentCache
    from auditor.core.environment import collect_environment
    from auditor.executors.generation import PromptRequest
    from auditor.records import RunConfig, RunRecord
    from auditor.studies.progress import QuietProgress
    from auditor.studies.run import StudyRun, spec_ref

    root = tmp_path / "images"
    _image(root / "a.png", (0, 0, 0))
    (root / "manifest.json").write_text(json.dumps({PROMPT: ["a.png"]}))
    config = RunConfig(
        prompt=PROMPT, llm="offline", t2i=spec_ref(f"folder:{root}"), vqa=spec_ref("blip2:unused"), embedder=None,
        images_per_prompt=1, seeds=[0], generation=GenerationSettings(batch_size=1),
    )  # fmt: skip
    record = RunRecord(run_id="run", config=config, environment=collect_environment())
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        study = StudyRun(tmp_path / "run", record, cache, QuietProgress(), device="cpu")
        requests = [PromptRequest(f"p{i}", text, indices=(0,)) for i, text in enumerate([PROMPT, OTHER, "a chef"])]
        with pytest.raises(AuditorError) as caught:
            study.run_images(requests)
        assert cache.entries("generate") == 0  # refused before the first batch was read
    finally:
        cache.close()
    message = str(caught.value)
    assert "2 problem(s)" in message and f"no images for prompt {OTHER!r}" in message and "'a chef'" in message


def test_a_prompt_longer_than_the_text_encoder_reads_gets_a_notice_naming_what_is_cut(tiny_models, tmp_path):
    """CLIP reads 77 tokens: a counterfactual's last words beyond them cannot change its images, so the stage
    says which prompt loses what; a short prompt gets no notice. The libraries' own log lines about it (the
    whole cut text, kilobytes of it) are dropped by their own handlers, so ``--quiet`` is quiet."""
    from auditor.core.cache import ContentCache
    from auditor.core.environment import collect_environment
    from auditor.executors.generation import PromptRequest
    from auditor.records import RunConfig, RunRecord
    from auditor.studies.progress import QuietProgress
    from auditor.studies.run import StudyRun, spec_ref

    notices: list[str] = []

    class Notices(QuietProgress):
        def notice(self, message: str) -> None:
            notices.append(message)

    long = "a photo of a nurse, " + "very " * 40 + "in a city"
    config = RunConfig(
        prompt=PROMPT, llm="offline", t2i=spec_ref(f"diffusers:{tiny_models.t2i}"), vqa=spec_ref("blip2:unused"),
        embedder=None, images_per_prompt=1, seeds=[0], generation=GenerationSettings(steps=1, batch_size=2),
    )  # fmt: skip
    record = RunRecord(run_id="run", config=config, environment=collect_environment())
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        study = StudyRun(tmp_path / "run", record, cache, Notices(), device="cpu")
        study.run_images([PromptRequest("short", PROMPT, indices=(0,)), PromptRequest("long", long, indices=(0,))])
    finally:
        cache.close()
    assert len(notices) == 1 and notices[0].startswith(f"the text encoder reads only the start of {long!r}: '")
    assert notices[0].endswith("in a city' is cut, so the images cannot show it")
    end = notices[0].split(": ", 1)[1].removesuffix(" is cut, so the images cannot show it")[1:-1]
    assert long.endswith(" " + end) and end.startswith("very ")  # as written, from a word's start
    import logging

    import diffusers.pipelines.stable_diffusion.pipeline_stable_diffusion as pipeline_module
    import transformers.tokenization_utils_base as tokenizer_module

    sources = inspect.getsource(pipeline_module) + inspect.getsource(tokenizer_module)
    assert all(line in sources for line in CUT_PROMPT_LOG_LINES)  # the libraries' wording, as filtered
    for library in ("diffusers", "transformers"):
        assert logging.getLogger(library).handlers  # the libraries' own, to the terminal
        for handler in logging.getLogger(library).handlers:
            said = [logging.LogRecord(library, logging.WARNING, "", 0, text, None, None) for text in
                    (*(line + " ..." for line in CUT_PROMPT_LOG_LINES), "another warning")]  # fmt: skip
            assert [handler.filter(record) for record in said] == [False, False, True]


def test_a_very_long_cut_prompt_is_quoted_by_its_start_and_end(tiny_models):
    """A prompt of thousands of characters: its notice quotes its start and end (where a counterfactual's words
    often are), not the whole prompt and the whole cut tail."""
    from types import SimpleNamespace

    from auditor.core.text import elided
    from auditor.executors.generation import QUOTED_PROMPT, say_cut_prompts
    from auditor.studies.progress import QuietProgress

    assert elided("short", 10) == "short" and elided("abcdefghijklmnop", 9) == "abc … nop"
    notices: list[str] = []

    class Notices(QuietProgress):
        def notice(self, message: str) -> None:
            notices.append(message)

    backend = T2I_BACKENDS.load(f"diffusers:{tiny_models.t2i}", settings=GenerationSettings(steps=1))
    long = "a photo of a nurse, " + "very " * 400 + "in a city"
    say_cut_prompts(SimpleNamespace(progress=Notices()), backend, [long])  # a study, as far as notices go
    assert len(notices) == 1 and len(notices[0]) < 2 * QUOTED_PROMPT + 100
    assert f"reads only the start of {elided(long, QUOTED_PROMPT)!r}: 'very " in notices[0]
    assert notices[0].endswith(" in a city' is cut, so the images cannot show it")


def test_the_unread_end_starts_at_the_first_word_not_read_whole():
    """Found by bisection over whole-word prefixes: a word read only in part is cut, and the end keeps the
    prompt's own case and punctuation."""
    from auditor.generation.diffusers_backend import unread_end

    pieces = {"Nurse,": 3, "Paris": 2}  # tokens per word; start and end-of-text tokens add 2
    tokens = lambda text: 2 + sum(pieces.get(word, 1) for word in text.split())  # noqa: E731
    prompt = "A photo of a Nurse, in Paris"  # 2 + 1 + 1 + 1 + 1 + 3 + 1 + 2 = 12 tokens
    assert [unread_end(prompt, window, tokens) for window in (11, 10, 9, 8, 6, 5, 2)] == [
        "Paris", "Paris", "in Paris", "Nurse, in Paris", "Nurse, in Paris", "a Nurse, in Paris", prompt,
    ]  # fmt: skip


def test_a_long_reading_encoder_cuts_at_the_pipelines_max_sequence_length(tiny_models):
    """A T5-style pipeline (PixArt-α: one tokenizer of 512, ``max_sequence_length=120``) cuts at 120 tokens, and a
    tokenizer that does not say its length cuts nothing known."""
    from transformers import CLIPTokenizer

    from auditor.generation.diffusers_backend import DiffusersTextToImage

    tokenizer = CLIPTokenizer.from_pretrained(tiny_models.t2i / "tokenizer", model_max_length=512)

    class LongReading:
        def __init__(self, tokenizer):
            self.tokenizer = tokenizer

        def __call__(self, prompt, max_sequence_length: int = 120):
            raise AssertionError("not called")

    def cut(pipeline, prompt: str) -> list:
        return DiffusersTextToImage(pipeline, ModelRef(spec="diffusers:x", backend="diffusers"), GenerationSettings()).cut_prompts([prompt])

    tokens = lambda text: len(tokenizer(text, verbose=False).input_ids)  # noqa: E731
    fits = "a photo of a nurse " + "very " * 30
    long = fits + "very " * 40 + "in a city"
    assert 77 < tokens(fits) <= 120 < tokens(long)
    assert cut(LongReading(tokenizer), fits) == []
    assert [(prompt, end.endswith("in a city")) for prompt, end in cut(LongReading(tokenizer), long)] == [(long, True)]
    unknown = CLIPTokenizer.from_pretrained(tiny_models.t2i / "tokenizer", model_max_length=int(1e30))

    class Unsaid:
        tokenizer = unknown

        def __call__(self, prompt):
            raise AssertionError("not called")

    assert cut(Unsaid(), long) == []


def test_a_run_of_an_unseeded_backend_lists_no_seeds_even_before_its_first_image():
    """The report and ``score`` say whether seed i made image i; a run that failed before any image must not list
    seeds its folder or images API would never have used."""
    from auditor.generation.diffusers_backend import DiffusersTextToImage
    from auditor.generation.folder import FolderImages
    from auditor.generation.openai_images import OpenAIImages
    from auditor.records.base import UNSEEDED_BACKENDS
    from tests.factories import make_record

    classes = {"diffusers": DiffusersTextToImage, "folder": FolderImages, "openai": OpenAIImages}
    assert sorted(classes) == T2I_BACKENDS.prefixes
    assert UNSEEDED_BACKENDS == {prefix for prefix, backend in classes.items() if not backend.seeded}
    record = make_record()
    assert record.prompt_sets == []
    for spec, seeds in [("diffusers:org/model", [0, 1]), ("folder:/data/images", None), ("openai:dall-e-3", None)]:
        t2i = ModelRef(spec=spec, backend=spec.split(":")[0])
        before_any_image = record.model_copy(update={"config": record.config.model_copy(update={"t2i": t2i})})
        assert before_any_image.image_seeds() == seeds, spec
