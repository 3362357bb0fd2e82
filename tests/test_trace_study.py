"""The trace study in process on tiny models: every recorded number against an independent computation,
human words apart from objects, resume without recomputation, bad input before any folder."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.store import RunStore
from auditor.metrics.multiple_testing import holm
from auditor.metrics.trace import bias_score, ssim
from auditor.prompting.nouns import default_noun_reader
from auditor.records import GenerationSettings, TraceRecord, TraceScoringSettings, load_record
from auditor.records.loading import load_record_summary
from auditor.reporting.overlays import GAP
from auditor.studies.progress import QuietProgress
from auditor.studies.trace import resume_trace, start_trace
from auditor.studies.trace_options import TraceOptions
from tests.clitools import run_auditor
from tests.fake_openai import colour_name
from tests.test_prompt_audit import StopAfter

WIDTH, HEIGHT = 48, 40
CAPTIONS = [
    "a person riding a bike in the park",
    "a man and a woman at the beach",  # no person word
    "two people playing tennis on a tennis court",
    "a person and a boy playing chess",  # a Table 2 word
    "A person riding a bike in the  park",  # repeats the first
    "a person holding an umbrella in the rain",
]
#: What the fake VQA server sees in an image, by its mean colour: objects, and human words among them.
OBJECT_LISTS = {
    "red": "a woman, a red umbrella, a dog and a bicycle",
    "green": "a man in a suit with a tie, a dog",
    "blue": "a person, a handbag, flowers and a dog",
}


def _objects_reply(rgb, question: str, body: dict) -> str:
    assert question == "List the objects in the image."
    return OBJECT_LISTS[colour_name(rgb)]


def write_captions(folder: Path) -> Path:
    path = folder / "captions.csv"
    rows = ["id,caption"] + [f'{i},"{text}"' for i, text in enumerate(CAPTIONS)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def trace_options(tiny_models, tiny_tracing_models, captions_file: Path, **changes) -> TraceOptions:
    settings = {
        "captions": str(captions_file),
        "t2i": f"diffusers:{tiny_tracing_models.t2i}",
        "vqa": "openai:gpt-4o-mini",
        "embedders": [f"clip:{tiny_models.clip}", f"dinov2:{tiny_tracing_models.dinov2}"],
        "detector": f"grounding-dino:{tiny_tracing_models.grounding_dino}",
        "segmenter": f"sam:{tiny_tracing_models.sam}",
        "seeds_per_triplet": 2,
        "generation": GenerationSettings(steps=2, batch_size=4, width=WIDTH, height=HEIGHT),
        "scoring": TraceScoringSettings(bootstrap=200, min_count=1),
        "show": 2,
    }
    return TraceOptions(**{**settings, **changes})


def _cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _independent_traces(record: TraceRecord):
    """z0 from separate ``output_type="latent"`` runs and the text encoder's outputs, per prompt id and seed."""
    import torch

    from auditor.generation.base import GenerationItem
    from auditor.generation.registry import T2I_BACKENDS

    backend = T2I_BACKENDS.load(record.config.t2i.spec, settings=record.config.generation)
    pipeline, tokenizer = backend.pipeline, backend.pipeline.tokenizer
    latents, eos, mean = {}, {}, {}
    for prompt_set in record.prompt_sets:
        items = [GenerationItem(prompt_set.prompt, i, seed) for i, seed in enumerate(record.config.seeds)]
        with torch.inference_mode():
            output = pipeline(**{**backend.pipeline_arguments(items), "output_type": "latent"}).images
            ids = tokenizer(
                [prompt_set.prompt], padding="max_length", max_length=tokenizer.model_max_length,
                truncation=True, return_tensors="pt",
            ).input_ids  # fmt: skip
            encoded = pipeline.text_encoder(ids)
        end = int((ids[0] == tokenizer.eos_token_id).nonzero()[0])
        for i in range(len(items)):
            latents[prompt_set.prompt_id, i] = output[i].numpy()
        eos[prompt_set.prompt_id] = encoded.pooler_output[0].numpy()
        mean[prompt_set.prompt_id] = encoded.last_hidden_state[0, 1 : end + 1].mean(dim=0).numpy()
    return latents, eos, mean


def test_trace_study_end_to_end_numbers_match_independent_computations(
    tiny_models, tiny_tracing_models, fake_openai, tmp_path
):
    fake_openai.answer_from_images(_objects_reply)
    options = trace_options(tiny_models, tiny_tracing_models, write_captions(tmp_path))
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    study = start_trace(options, store, cache, QuietProgress(), run_name="e2e")
    record = study.run()
    run_dir = study.run_dir
    assert record.status == "completed" and record.errors == []
    assert load_record(run_dir / "record.json", TraceRecord).model_dump() == record.model_dump()
    listed = load_record_summary(run_dir / "record.json")  # a listing reads a trace's triplets, not its results
    assert listed.subject() == record.subject() and record.subject().startswith("trace of 3 triplets from captions")
    assert record.results_from == {"t2i": record.config.t2i, "vqa": record.config.vqa}  # what made its results

    # Triplets: the neutral captions, swapped, with where they came from.
    selection = record.selection
    assert (selection.captions, selection.without_person, selection.with_indicator, selection.duplicates) == (
        6,
        1,
        1,
        1,
    )
    assert selection.indicator_counts == {"boy": 1}
    assert [(t.source_file, t.source_row) for t in record.triplets] == [
        (str(tmp_path / "captions.csv"), 0), (str(tmp_path / "captions.csv"), 2), (str(tmp_path / "captions.csv"), 5)
    ]  # fmt: skip
    assert record.triplets[1].prompts == {
        "neutral": "two people playing tennis on a tennis court",
        "feminine": "two women playing tennis on a tennis court",
        "masculine": "two men playing tennis on a tennis court",
    }
    assert record.triplets[1].traced_words["feminine"] == ["women", "tennis", "court"]
    assert record.triplets[0].subject_words == {"neutral": "person", "feminine": "woman", "masculine": "man"}

    # Images: three prompts per triplet share each seed; every file is what the record says.
    assert len(record.prompt_sets) == 9
    for prompt_set in record.prompt_sets:
        assert [image.seed for image in prompt_set.images] == record.config.seeds == [0, 1]
        for image in prompt_set.images:
            assert hashlib.sha256((run_dir / image.file).read_bytes()).hexdigest() == image.sha256

    # Prompt and denoising stages: the captured encodings and z0 equal a separate output_type="latent" run.
    latents, eos, mean = _independent_traces(record)
    by_key = {(p.triplet, p.image_index): p for p in record.pairs}
    assert len(by_key) == 6
    for triplet in record.triplets:
        ids = triplet.prompt_ids
        for i in range(2):
            pair = by_key[triplet.index, i]
            for side, values in (("feminine", pair.neutral_feminine), ("masculine", pair.neutral_masculine)):
                expected_latent = _cosine(latents[ids["neutral"], i], latents[ids[side], i])
                assert values["denoising_z0"] == pytest.approx(expected_latent, abs=1e-5)
                assert values["prompt_eos"] == pytest.approx(_cosine(eos[ids["neutral"]], eos[ids[side]]), abs=1e-6)
                assert values["prompt_mean"] == pytest.approx(_cosine(mean[ids["neutral"]], mean[ids[side]]), abs=1e-6)

    # Image stage: SSIM of the saved PNGs, and cosines of independently computed embeddings.
    from PIL import Image

    from auditor.perception.registry import EMBEDDERS

    files = {(s.prompt_id, image.index): run_dir / image.file for s in record.prompt_sets for image in s.images}
    pixels = {key: np.asarray(Image.open(path).convert("RGB")) for key, path in files.items()}
    embedders = [EMBEDDERS.load(ref.spec) for ref in record.config.image_embedders]
    vectors = [
        dict(zip(files, embedder.embed_images([Image.open(path).convert("RGB") for path in files.values()])))
        for embedder in embedders
    ]
    for (t, i), pair in by_key.items():
        ids = record.triplets[t].prompt_ids
        for side, values in (("feminine", pair.neutral_feminine), ("masculine", pair.neutral_masculine)):
            n, other = (ids["neutral"], i), (ids[side], i)
            assert values["image_ssim"] == pytest.approx(ssim(pixels[n], pixels[other]), abs=1e-12)
            for k, table in enumerate(vectors):
                assert values[f"image_embedding_{k}"] == pytest.approx(_cosine(table[n], table[other]), abs=1e-5)

    # The per-stage table: means of the recorded pairs, intervals, and a side only when the interval excludes 0 and
    # the swap test agrees, which three triplets cannot give (at least 2 of the 8 swaps are as extreme as the data).
    rows = {row.key: row for row in record.similarity}
    assert list(rows) == [
        "prompt_eos", "prompt_mean", "denoising_z0", "image_ssim", "image_embedding_0", "image_embedding_1", "objects"
    ]  # fmt: skip
    for key in ("denoising_z0", "image_ssim", "image_embedding_1"):
        row = rows[key]
        assert row.mean_neutral_feminine == pytest.approx(np.mean([p.neutral_feminine[key] for p in record.pairs]))
        assert row.units == 3 and row.pairs == 6 and row.ci is not None
        assert row.swap_p >= 0.25 and row.closer_to == "undecided"

    # Objects: the VQA answers' nouns, counted by the detector's boxes, human words apart.
    reader = default_noun_reader()
    for prompt_id, images in record.images.items():
        answers = {a.image_index: a.answers["objects"] for a in record.answers[prompt_id]}
        for image in images:
            vocabulary = reader.vocabulary(answers[image.image_index])
            assert (tuple(image.objects), tuple(image.humans)) == (vocabulary.objects, vocabulary.humans)
            labels = [d.label for d in image.detections]
            assert set(labels) <= set(image.objects) | set(image.humans)
            assert image.counts == {o: labels.count(o) for o in set(labels) if o in image.objects}
            assert image.human_counts == {h: labels.count(h) for h in set(labels) if h in image.humans}
            assert all(d.human == (d.label in image.humans) for d in image.detections)
    looked = [image for images in record.images.values() for image in images]
    assert all("dog" in image.objects for image in looked)  # every answer names a dog
    assert set() < {h for image in looked for h in image.humans} <= {"woman", "man", "person"}
    assert not {"woman", "man", "person"} & {o for image in looked for o in image.objects}
    object_names = {row.name for row in record.objects}
    human_names = {row.name for row in record.humans}
    assert not object_names & human_names
    assert not {row.name for row in record.ranking} & human_names

    # C(o, P), BS and the ranking by hand from the per-image counts.
    sizes = {name: sum(len(record.images[t.prompt_ids[name]]) for t in record.triplets) for name in record.set_sizes}
    assert record.set_sizes == sizes == {"neutral": 6, "feminine": 6, "masculine": 6}
    for row in record.objects:
        totals = {
            name: sum(i.counts.get(row.name, 0) for t in record.triplets for i in record.images[t.prompt_ids[name]])
            for name in sizes
        }
        assert (row.neutral, row.feminine, row.masculine) == (
            totals["neutral"],
            totals["feminine"],
            totals["masculine"],
        )
        expected = bias_score(row.masculine, row.feminine, 6, 6) if row.masculine + row.feminine else None
        assert row.bias_score == expected
    assert [row.name for row in record.ranking] == [
        row.name
        for row in sorted(
            (r for r in record.objects if r.bias_score is not None and max(r.neutral, r.feminine, r.masculine) >= 1),
            key=lambda r: (-r.bias_score, r.name),
        )
    ]
    assert all(row.bias_score_ci is not None and row.bias_score_ci.low <= row.bias_score <= row.bias_score_ci.high
               for row in record.ranking if row.bias_score not in (0.0, 1.0))  # fmt: skip

    # χ²: objects then the five groups, triplet then pairs; Holm over the tests that ran.
    assert [(t.scope, len(t.sets)) for t in record.chi_square[:4]] == [
        ("objects", 3),
        ("objects", 2),
        ("objects", 2),
        ("objects", 2),
    ]
    assert len(record.chi_square) == 4 * 6
    ran = [t for t in record.chi_square if t.p_value is not None]
    assert [t.p_adjusted for t in ran] == pytest.approx(holm([t.p_value for t in ran]))
    assert all(t.note and t.p_adjusted is None for t in record.chi_square if t.p_value is None)

    # Dependency groups: every kept detection in one group; explicit exactly when the prompt names it.
    assert record.groups is not None and [g.group for g in record.groups][-1] == "hidden"
    for triplet in record.triplets:
        for name, prompt_id in triplet.prompt_ids.items():
            for image in record.images[prompt_id]:
                assert len(image.groups) + image.dropped_detections == len(image.detections)
                for item in image.groups:
                    assert item.group.startswith("explicitly") == (item.name in triplet.nouns[name])
                    assert (item.guided_by is not None) == item.group.endswith("guided")
                detected = {d.label for d in image.detections}
                nouns = set(triplet.nouns[name])
                assert set(image.hidden) | set(image.hidden_humans) == nouns - detected
                assert not set(image.hidden) & human_names

    # Pictures: the three images side by side over their attention overlays, for the first two triplets.
    assert [p.triplet for p in record.pictures] == [0, 1]
    picture = Image.open(run_dir / record.pictures[0].file)
    assert picture.size == (3 * WIDTH + 2 * GAP, 2 * HEIGHT + GAP)
    top_left = np.asarray(picture)[:HEIGHT, :WIDTH]
    assert np.array_equal(top_left, pixels[record.triplets[0].prompt_ids["neutral"], 0])
    assert record.pictures[0].words == {"neutral": "person", "feminine": "woman", "masculine": "man"}
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Prompt-to-image trace" in html and "pictures/triplet-0000.png" in html
    seed = record.config.seeds[record.pictures[0].image_index]  # which images a picture shows, and in what order
    assert f"<strong>triplet 0, seed {seed}</strong>: columns left to right neutral, feminine, masculine" in html
    assert "<tr><th>space</th><th>measure</th><th>closer to</th>" in html  # each stage's verdict beside its name
    roles = [role for role, _ in record.models_by_role()]  # the header says which model did what
    assert roles == ["t2i", "vqa", "embedder", "embedder", "detector", "segmenter"], roles
    assert all(f"<tr><th>{role}</th>" in html for role in roles)
    timings = {t.stage: (t.computed, t.cached) for t in record.timings}
    assert set(timings) == {"generate", "perceive", "embed", "detect", "group", "score", "report"}
    images = sum(len(s.images) for s in record.prompt_sets)
    assert timings["generate"] == (images, 0) and timings["embed"] == (2 * images, 0)  # two embedders, each image once
    cache.close()


def test_interrupted_trace_resumes_without_recomputing(tiny_models, tiny_tracing_models, fake_openai, tmp_path):
    fake_openai.answer_from_images(_objects_reply)
    options = trace_options(tiny_models, tiny_tracing_models, write_captions(tmp_path), segmenter=None, embedders=[])
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    study = start_trace(options, store, cache, StopAfter("generate", 4), run_name="r")
    with pytest.raises(KeyboardInterrupt):
        study.run()
    partial = load_record(study.run_dir / "record.json", TraceRecord)
    assert partial.status == "interrupted" and partial.errors[-1].stage == "generate"
    assert cache.entries("trace") == 4 and sum(len(s.images) for s in partial.prompt_sets) == 4
    cache.close()
    # Its report says it has no scores yet, instead of empty tables that would read as "nothing leans".
    shown = run_auditor("report", str(study.run_dir))
    assert shown.returncode == 0, shown.stderr
    said = "No scores: the run stopped before its images were scored (3 triplets, 4 images made so far); " \
        f"auditor trace --resume {study.run_dir} goes on with it."  # fmt: skip
    assert f"{said}\n" in shown.stdout  # whole on its line however long the path: rich would break it mid-word
    assert "Most masculine objects" not in shown.stdout and "χ²" not in shown.stdout
    assert json.loads(run_auditor("report", str(study.run_dir), "--json").stdout)["scored"] is False

    cache = ContentCache(tmp_path / "cache.sqlite")
    record = resume_trace("r", store, cache, QuietProgress()).run()
    assert record.status == "completed" and record.errors == []
    timings = {t.stage: t for t in record.timings}
    assert (timings["generate"].cached, timings["generate"].computed) == (4, 14)
    assert cache.misses["trace"] == 14 and cache.entries("trace") == 18
    assert (timings["perceive"].computed, timings["detect"].computed) == (18, 18)
    cache.close()

    # A second run with the same settings, in a new folder, asks no model anything.
    cache = ContentCache(tmp_path / "cache.sqlite")
    again = start_trace(options, store, cache, QuietProgress(), run_name="again").run()
    timings = {t.stage: t for t in again.timings}
    assert all(timings[stage].computed == 0 for stage in ("generate", "perceive", "detect"))
    assert cache.misses["trace"] == cache.misses["perceive"] == cache.misses["detect"] == 0
    assert [p.model_dump() for p in again.pairs] == [p.model_dump() for p in record.pairs]
    assert again.objects == record.objects and again.chi_square == record.chi_square
    cache.close()

    # An attempt on a scored run forgets its scores until it scores again (it may run other models): one stopped
    # before then shows none of the earlier numbers, on the page too.
    from auditor.reporting.trace import scored, write_trace_report

    cache = ContentCache(tmp_path / "cache.sqlite")
    later = start_trace(options, store, cache, QuietProgress(), run_name="later")
    later.record = record.model_copy(deep=True)
    later.clear_scores()
    cache.close()
    assert scored(record) and not scored(later.record)
    assert (later.record.similarity, later.record.ranking, later.record.chi_square) == ([], [], [])
    page = write_trace_report(later.record, later.run_dir).read_text(encoding="utf-8")
    assert "No scores: the run stopped before its images were scored" in page and 'id="chi-square"' not in page


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"captions": None}, "give a caption file or --professions"),
        ({"professions": True}, "give a caption file or --professions"),
        ({"t2i": "openai:gpt-image-1"}, "is not one (use diffusers:"),
        ({"detector": None}, "--segmenter segments the detector's boxes"),
        ({"seeds": [1, 2, 3]}, "--seed lists 3 seeds for 2 seeds per triplet"),
        ({"seeds_per_triplet": 1, "seeds": [1, 2]}, "--seed lists 2 seeds for 1 seed per triplet (--seeds)"),
        ({"detector": "owlv2:/x", "segmenter": None, "text_threshold": 0.3}, "owlv2 detectors have no text threshold"),
        ({"embedders": ["clip:/a", "clip:/a"]}, "names the same embedder twice"),
    ],
)
def test_bad_options_are_one_line_and_create_no_folder(tiny_models, tiny_tracing_models, tmp_path, changes, message):
    changes = {"vqa": f"blip2:{tiny_models.vqa}", **changes}
    options = trace_options(tiny_models, tiny_tracing_models, write_captions(tmp_path), **changes)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(AuditorError, match=re.escape(message)):
        start_trace(options, store, ContentCache(tmp_path / "cache.sqlite"), QuietProgress())
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "option, given, message",
    [
        ("detector", "owlv2:{grounding_dino}", "is a 'grounding-dino' model, not 'owlv2'"),
        ("detector", "grounding-dino:{sam}", "is a 'sam' model, not 'grounding-dino' or 'mm-grounding-dino'"),
        ("segmenter", "sam:{owlv2}", "is a 'owlv2' model, not 'sam'"),
        ("segmenter", "sam:{t2i}", "is not a transformers model folder: it has no config.json"),
    ],
)
def test_a_detector_or_segmenter_folder_of_another_kind_is_refused_before_a_folder(
    tiny_models, tiny_tracing_models, tmp_path, option, given, message
):
    """A folder of another model is refused when the options are checked, not after images were made for it."""
    spec = given.format(**{name: getattr(tiny_tracing_models, name) for name in ("grounding_dino", "owlv2", "sam", "t2i")})
    changes = {"vqa": f"blip2:{tiny_models.vqa}", option: spec}
    options = trace_options(tiny_models, tiny_tracing_models, write_captions(tmp_path), **changes)
    with pytest.raises(AuditorError, match=re.escape(message)):
        start_trace(options, RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite"), QuietProgress())
    assert not (tmp_path / "runs").exists()


def test_a_caption_file_without_neutral_captions_is_one_line(tiny_models, tiny_tracing_models, tmp_path):
    path = tmp_path / "captions.txt"
    path.write_text("a man at the beach\na person and a girl\n\na dog\n", encoding="utf-8")
    options = trace_options(tiny_models, tiny_tracing_models, path, vqa=f"blip2:{tiny_models.vqa}")
    with pytest.raises(AuditorError, match=r"no neutral captions in .*captions.txt: of 3 captions, 2 have no"):
        start_trace(options, RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite"), QuietProgress())
    assert not (tmp_path / "runs").exists()
