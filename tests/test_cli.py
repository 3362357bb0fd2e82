"""CLI skeleton: fast help, doctor, runs, one-line errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.core.store import write_model
from auditor.records import ModelRef, load_record
from tests.clitools import run_auditor
from tests.factories import make_record


def loaded_by(argv: list[str], prefixes: tuple[str, ...]) -> tuple[list[str], str]:
    """The modules starting with one of ``prefixes`` that ``auditor *argv`` loaded, run in a fresh interpreter,
    and what it printed."""
    code = (
        "import json, sys\n"
        "from auditor.cli import main\n"
        f"sys.argv = ['auditor', *{argv!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    printed, _, loaded = result.stdout.rpartition("LOADED ")
    return json.loads(loaded), printed


@pytest.mark.parametrize("command", [["--help"], ["runs"]])
def test_help_and_a_listing_import_no_model_or_numeric_library(tmp_path, command):
    """What every command pays before it does anything: no model library, and for commands that only read records'
    words, not numpy, scipy, YAML or the HTML templates either."""
    write_model(tmp_path / "runs" / "r1" / "record.json", make_record("r1"))
    argv = [*command, "--runs-dir", str(tmp_path / "runs")] if command == ["runs"] else command
    heavy = ("torch", "diffusers", "transformers", "nltk", "openai", "langchain", "numpy", "scipy", "yaml", "jinja2")
    loaded, printed = loaded_by(argv, heavy)
    assert loaded == []
    assert ("doctor" if command == ["--help"] else "r1") in printed


@pytest.mark.parametrize(("command", "not_loaded"), [
    (["--help"], ("pydantic", "auditor.records")),
    (["prompt", "--help"], ("pydantic_settings", "auditor.records")),  # typer checks option values with pydantic
])
def test_help_builds_no_record_models(command, not_loaded):
    """A command's ``--help`` (and a usage error) is the command line alone, not the building of auditor's record
    models and settings, which took more than half of its 0.4 s."""
    loaded, printed = loaded_by(command, not_loaded)
    assert loaded == []
    assert ("--vqa-batch-size" if "prompt" in command else "doctor") in printed


def test_doctor_reports_credentials_without_their_values():
    secret = "sk-test-very-secret-value"
    result = run_auditor("doctor", "--json", env={"OPENAI_API_KEY": secret}, process=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["credentials"]["OPENAI_API_KEY"] is True
    assert report["stopwords"] == 179
    assert report["wordnet"]["present"] is True
    assert secret not in result.stdout + result.stderr
    human = run_auditor("doctor", env={"OPENAI_API_KEY": secret}, process=True)
    assert human.returncode == 0 and secret not in human.stdout
    lines = human.stdout.splitlines()  # one column of values, however long a variable's name
    assert len({len(line) - len(line.split("  ", 1)[1].lstrip()) for line in lines}) == 1, human.stdout


def test_runs_lists_records(tmp_path):
    runs = tmp_path / "my runs"  # a space: the command that continues a run must paste back as one argument
    write_model(runs / "r1" / "record.json", make_record("r1", prompt="a photo of a nurse").model_copy(
        update={"status": "completed"}
    ))
    write_model(runs / "r2" / "record.json", make_record("r2").model_copy(update={"status": "interrupted"}))
    write_model(runs / "r3" / "record.json", make_record("r3", prompt="[/x] [bold]y").model_copy(
        update={"status": "completed"}
    ))  # a prompt is text, not rich markup: neither a crash nor swallowed
    far = f"folder:{tmp_path / ('a-long-folder-name-' * 5)}/images"  # a model's local path, longer than 80 columns
    r4 = make_record("r4").model_copy(update={"status": "completed"})
    r4.config.t2i = ModelRef(spec=far, backend="folder")
    write_model(runs / "r4" / "record.json", r4)
    (runs / "broken").mkdir()
    (runs / "broken" / "record.json").write_text("{not json")
    result = run_auditor("runs", "--json", "--runs-dir", str(runs))
    assert result.returncode == 0, result.stderr
    rows = {row["run_id"]: row for row in json.loads(result.stdout)}
    assert rows["r1"]["prompt"] == "a photo of a nurse"
    assert rows["broken"]["status"] == "unreadable" and "not valid JSON" in rows["broken"]["why"]
    command = f"auditor prompt --resume '{runs / 'r2'}'"
    assert "resume" not in rows["r1"] and rows["r2"]["resume"] == command
    table = run_auditor("runs", "--runs-dir", str(runs), env={"COLUMNS": "80"}, process=True)
    assert table.returncode == 0, table.stderr
    assert re.search(r"^r1  completed  started \d{4}-\d\d-\d\d \d\d:\d\d UTC\n  a photo of a nurse", table.stdout, re.M)
    assert "[/x] [bold]y" in table.stdout
    unreadable = table.stdout[table.stdout.index("broken  unreadable") :]  # and why, under it
    assert "record.json is not valid JSON" in " ".join(unreadable.split()[:40])
    assert f"r2 (interrupted) continues with: {command}" in table.stdout
    assert f"\n  t2i  {far}\n" in table.stdout  # whole on its line, to copy: rich would break it mid-word
    r1_models = [(model["role"], model["spec"]) for model in rows["r1"]["models"]]  # which model did what
    assert r1_models == [("llm", "offline"), ("t2i", "folder:images"), ("vqa", "blip2:tiny")], r1_models
    assert re.search(r"^  llm  offline\n  t2i  folder:images\n  vqa  blip2:tiny$", table.stdout, re.M)

    shutil.copytree(runs / "r2", runs / "r2-copy")  # its record still says r2: listed by the name to give
    rows = {row["run_id"]: row for row in json.loads(run_auditor("runs", "--json", "--runs-dir", str(runs)).stdout)}
    assert rows["r2-copy"]["resume"] == f"auditor prompt --resume '{runs / 'r2-copy'}'"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["runs", "--no-such-option"], "No such option: --no-such-option"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["plan", "x", "--max-counterfactuals", "1"], "--max-counterfactuals"),
        (["score"], "Missing argument"),
        (["plan"], "Missing argument 'PROMPT'"),  # plan has no --resume: its prompt is required
        (["score", "x.json", "--ci-seed", "-1"], "--ci-seed"),  # numpy takes no negative seed
        # options of the intervals beside --bootstrap 0, which makes none: a slip, said (not dropped unsaid)
        (["score", "x.json", "--bootstrap", "0", "--ci-method", "bca"], "--ci-method bca sets how intervals are made"),
        (["score", "x.json", "--bootstrap", "0", "--ci-seed", "3"], "--ci-seed 3 seeds the resampling, but --boot"),
        (["prompt", "x", "--llm", "offline", "--bootstrap", "0", "--ci-method", "bca"], "but --bootstrap 0 turns"),
        (["compare", "a", "b", "--bootstrap", "0", "--ci-seed", "2"], "--ci-seed 2 seeds the resampling, but --boot"),
        (["t2iat", "run", "ses", "--bootstrap", "0", "--ci-seed", "1"], "--ci-seed 1 seeds the resampling, but --boot"),
        (["t2iat", "run", "--permutation-seed", "-1"], "--permutation-seed"),
        (["prompt", "x", "--llm", "offline", "--seed", "99999999999999999999"], "--seed takes seeds from 0 to 2^63 - 1"),
        (["prompt", "x", "--llm", "offline", "--images", "3", "--seed", "4,-1"], "--seed takes seeds from 0 to 2^63 - 1"),
        (
            ["prompt", "x", "--llm", "offline", "--images", "4", "--seed", str(2**63 - 3)],
            f"--seed {2**63 - 3} leaves no room below 2^63 for the seeds of 4 images ({2**63 - 3} to {2**63})",
        ),
        (["prompt", "x", "--llm", "offline", "--guidance", "nan"], "--guidance nan: input should be a finite number"),
        (["prompt", "x", "--llm", "offline", "--steps", "99999999999999999999"], "--steps"),  # schedulers: <= 1000
        (["prompt", "x", "--llm", "offline", "--device", "tpu"], "'tpu' is not a device auditor runs on"),
        (["prompt", "x", "--llm", "offline", "--images", "3", "--seed", "5,1,5"], "--seed repeats 5: a seed makes"),
        (["prompt", "x", "--llm", "offline", "--images", "3", "--seed", "1,,2"], "--seed '1,,2' has an empty item"),
        (["prompt", "x", "--llm", "offline", "--seed", ""], "--seed '' has an empty item"),
        (["trace", "--professions", "--seeds", "2", "--seed", "3,3"], "--seed repeats 3: a seed makes"),
        (["trace", "--professions", "--width", "0"], "--width 0: input should be greater than or equal to 8"),
        (["prompt", "x", "--llm", "offline", "--width", "30"], "--width 30: input should be a multiple of 8"),
        (["prompt", "x", "--llm", "offline", "--t2i", "diffusers:"], "--t2i diffusers: names no model"),  # no folder
        (["trace", "--professions", "--embedder", "dinov2:"], "--embedder dinov2: names no model: give one after"),
        (["prompt", "x", "--llm", "offline", "--height", "99999992"], "--height 99999992: input should be less than "
         "or equal to 4096"),  # a typo that would exhaust the machine's memory before the first image
        (["explore", "--topic", "t", "--llm", "offline", "--guidance", "1e308"],
         "--guidance 1e+308: input should be less than or equal to 100"),
        (["trace", "--professions", "--height", "12"], "--height 12: input should be a multiple of 8"),
        (["score", "x.json", "--bootstrap", "99999999999"], "--bootstrap"),  # 1.5 TiB of resamples
        (["score", "x.json", "--bootstrap", "1"], "1 resamples cannot place a 95% interval's ends"),
        (["prompt", "x", "--llm", "offline", "--bootstrap", "39"], "give at least 40"),
        (["amplification", "run", "--captions", "c.csv", "--bootstrap", "0"], "--bootstrap"),
        (["prompt", "x", "--llm", "offline", "--images", "99999999999999999999"], "--images"),  # no C ssize_t
        (["t2iat", "occupations", "--images", "1000000000000"], "--images"),  # a seed list that fills memory
        (["trace", "--professions", "--seeds", "100001"], "--seeds"),
        (["prompt", "x", "--llm", "offline", "--scheduler", "Bogus"], "--scheduler Bogus: diffusers has no scheduler"),
        (["amplification", "run", "--captions", "c.csv", "--images", "0"], "--images"),
        # a model path with a typo is bad input, refused before any run folder is made for it
        (["prompt", "x", "--llm", "offline", "--t2i", "diffusers:./sd15"], "--t2i diffusers:./sd15: there is no file or"),
        (["prompt", "x", "--llm", "offline", "--vqa", "blip2:~/no-blip2"], "'~/no-blip2'; point it at a local copy of"),
        (["prompt", "x", "--llm", "offline", "--t2i", "folder:./made-elsewhere"], "image folder './made-elsewhere' does"),
        (["trace", "--professions", "--detector", "owlv2:./owl"], "--detector owlv2:./owl: there is no file or folder"),
        (["t2iat", "run", "science-arts", "--embedder", "clip:/no/clip"], "--embedder clip:/no/clip: there is no file"),
        # in the words of the check, without the "Value error, " pydantic (which typer uses) puts before them
        (["prompt", "x", "--ci-method", "foo"], "Invalid value for '--ci-method': 'foo' is not one of 'percentile'"),
        (["t2iat", "occupations", "--prompt", "a photo"], "settings: prompt: 'a photo' must contain {occupation}"),
    ],
)
def test_usage_errors_are_one_line(args, expected):
    result = run_auditor(*args, process=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "args",
    [["frobnicate"], ["runs", "--json"], ["score", "missing.json"], ["t2iat"], ["prompt", "x", "--llm", "offline", "--scheduler", "Bogus"]],
)
def test_a_command_run_in_the_test_process_gives_what_a_fresh_process_gives(args, tmp_path):
    """tests.clitools runs most commands in the test's process: the same exit code and output as `python -m
    auditor`, and the test's environment, arguments and folder untouched afterwards."""
    there = run_auditor(*args, env={"AUDITOR_TEST_ONLY": "1"}, cwd=tmp_path.parent, process=True)
    before = (dict(os.environ), list(sys.argv), os.getcwd())
    here = run_auditor(*args, env={"AUDITOR_TEST_ONLY": "1"}, cwd=tmp_path.parent)
    assert (dict(os.environ), sys.argv, os.getcwd()) == before
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr)


def test_an_audit_and_an_llm_plan_in_the_test_process_give_what_a_fresh_process_gives(tiny_models, fake_openai, tmp_path):
    """The same with models loaded and an LLM asked over HTTP: the same records, output and requests."""
    from tests.test_planning_cli import PLAN_JSON
    from tests.test_prompt_audit import tiny_args

    records = []
    for where, process in (("there", True), ("here", False)):
        runs = tmp_path / where
        audit = run_auditor("prompt", "a photo of a nurse", *tiny_args(tiny_models, images=1), "--quiet",
                            "--name", "same", env={"AUDITOR_RUNS_DIR": str(runs)}, process=process)  # fmt: skip
        assert (audit.returncode, audit.stdout, audit.stderr) == (0, f"{runs / 'same'}\n", "")
        records.append(load_record(runs / "same" / "record.json"))
    there, here = records
    assert (here.config, here.prompt_sets, here.answers, here.scores) == (there.config, there.prompt_sets, there.answers, there.scores)

    plans = []
    for process in (True, False):
        fake_openai.chat_replies("Gender and age.", "Gender: ... Age: ...", f"```json\n{PLAN_JSON}\n```")
        plans.append(run_auditor("plan", "a photo of a pharmacist", "--llm", "openai:gpt-4o-mini", "--json", process=process))
    assert plans[0].returncode == 0 and (plans[0].stdout, plans[0].stderr) == (plans[1].stdout, plans[1].stderr)
    requests = [request.json for request in fake_openai.chat_requests()]
    assert requests[:3] == requests[3:]


def test_a_group_without_a_command_shows_its_help():
    result = run_auditor("t2iat")
    assert result.returncode == 0 and "Usage: auditor t2iat" in result.stdout


@pytest.mark.parametrize(
    "args, env",
    [
        (["plan", "a photo of a cat", "--llm", "offline", "--out", "{blocker}/plan"], {}),
        (["schemas", "--out", "{blocker}/schemas"], {}),
        (["schemas", "--out", "{blocker}"], {}),
        (["selftest", "--out", "{blocker}/selftest"], {}),
        (["selftest", "--out", "{blocker}"], {}),
        (["prompt", "a photo of a cat", "--llm", "offline"], {"AUDITOR_CACHE_PATH": "{blocker}/cache.sqlite"}),
    ],
)
def test_unwritable_output_paths_are_one_line(tmp_path, args, env):
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where a folder is expected")
    fill = lambda text: text.replace("{blocker}", str(blocker))  # noqa: E731
    result = run_auditor(*map(fill, args), env={name: fill(value) for name, value in env.items()}, process=True)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and str(blocker) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "File exists" not in result.stderr  # the OS's words for a file where a folder was wanted say little


def test_selftest_says_a_file_stands_where_its_models_folder_goes(tmp_path):
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "models").write_text("not a folder")
    result = run_auditor("selftest", "--out", str(tmp_path / "st"), process=True)
    assert result.returncode == 2 and result.stderr == (
        f"error: cannot write the selftest folder {tmp_path / 'st'}: {tmp_path / 'st' / 'models'} is not a folder\n"
    )


@pytest.mark.parametrize(
    "command, refused",
    [
        (["prompt", "--executor", "bogus"], "unknown executor 'bogus'"),
        (["batch", "--executor", "bogus"], "unknown executor 'bogus'"),
        (["explore", "--executor", "bogus"], "unknown executor 'bogus'"),
        (["amplification", "run", "--executor", "bogus", "--ray-address", "auto"], "unknown executor 'bogus'"),
        (["trace", "--executor", "overlapped"], "auditor trace runs its stages one after the other"),
        (["t2iat", "occupations", "--executor", "bogus"], "unknown executor 'bogus'"),
    ],
)
def test_resume_checks_its_options_before_it_looks_for_the_run_or_opens_the_cache(tmp_path, command, refused):
    result = run_auditor(*command, "--resume", "no-such-run")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and refused in lines[0], result.stderr
    assert not (tmp_path / "cache.sqlite").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["prompt", "--resume", ""], ["explore", "--resume", " "], ["trace", "--resume", ""], ["score", ""],
        ["report", ""],
    ],  # fmt: skip
)
def test_an_empty_run_name_is_refused_not_read_as_the_working_directory(tmp_path, command):
    """An unset shell variable (``--resume "$RUN"``) gives an empty name: not a new run, not the folder it is run in."""
    result = run_auditor(*command, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr == (
        "error: no run given (an empty name): give a run id, a run folder or its record.json\n"
    )


def test_an_empty_auditor_variable_is_an_unset_one(tmp_path, monkeypatch):
    from auditor.core.settings import get_settings

    monkeypatch.setenv("AUDITOR_RUNS_DIR", "")
    monkeypatch.setenv("AUDITOR_CACHE_PATH", "")
    settings = get_settings()
    assert settings.runs_dir == Path("runs") and settings.cache_file == settings.home / "cache.sqlite"


def test_out_of_memory_in_a_run_is_one_line_that_says_what_to_change(tmp_path):
    """A real allocator failure (torch's CPU allocator, asked for an exabyte) ends the command in one line."""
    import torch

    from auditor.commands.common import run_resumable
    from auditor.core.errors import BackendError, out_of_memory

    class HugeStudy:
        run_dir = tmp_path / "run"

        def run(self):
            return torch.empty(2**60, dtype=torch.uint8)

    with pytest.raises(BackendError) as caught:
        run_resumable(HugeStudy())
    message = str(caught.value)
    assert message.startswith("out of memory (") and "can't allocate memory" in message
    assert "start it again with a smaller --batch-size; a new run with otherwise the same settings reuses" in message
    assert message.endswith(f"(the failed run is kept in {tmp_path / 'run'})")
    assert len(message.splitlines()) == 1
    assert out_of_memory(MemoryError()) == "MemoryError"
    assert out_of_memory(RuntimeError("shape mismatch")) is None and out_of_memory(ValueError("can't allocate memory")) is None


@pytest.mark.parametrize("sigterm", [False, True])
def test_an_interrupted_command_says_so_and_exits_130_or_143_on_sigterm(monkeypatch, capsys, sigterm):
    """typer turns Ctrl-C inside a command into the exit code 130 and returns it: the entry point exits with it
    and says so (it used to exit 0 in silence), 143 for SIGTERM."""
    from auditor import cli
    from auditor.commands import common

    def interrupted(_runs_dir):
        if sigterm:
            cli._terminate(15, None)
        raise KeyboardInterrupt

    monkeypatch.setattr(common, "run_store", interrupted)
    monkeypatch.setattr(cli, "SIGTERM_RECEIVED", type(cli.SIGTERM_RECEIVED)())  # this test's own
    monkeypatch.setattr(sys, "argv", ["auditor", "runs"])
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as exited:
            cli.main()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert exited.value.code == (143 if sigterm else 130)
    assert capsys.readouterr().err == ("error: terminated (SIGTERM)\n" if sigterm else "error: interrupted\n")


def test_doctor_gives_its_folders_as_absolute_paths(tmp_path):
    """A relative AUDITOR_RUNS_DIR or AUDITOR_HOME is where doctor was run: --json says which folder that is."""
    result = run_auditor("doctor", "--json", env={"AUDITOR_RUNS_DIR": "my-runs", "AUDITOR_HOME": "my-home"})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["runs_dir"], report["home"]) == (str(tmp_path / "my-runs"), str(tmp_path / "my-home"))


def test_doctor_lists_the_models_of_the_hub_cache_huggingface_hub_reads(tmp_path, monkeypatch):
    """The hub cache moves with XDG_CACHE_HOME (and HF_HOME, HF_HUB_CACHE): doctor asks huggingface_hub where it is."""
    (tmp_path / "xdg" / "huggingface" / "hub" / "models--someone--some-model" / "snapshots").mkdir(parents=True)
    (tmp_path / "xdg" / "huggingface" / "hub" / "models--half-made").mkdir()  # no snapshot: no model
    for name in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    result = run_auditor("doctor", "--json", env={"XDG_CACHE_HOME": str(tmp_path / "xdg")}, process=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cached_models"] == ["someone/some-model"]
    assert json.loads(result.stdout)["cached_models_error"] is None


def test_doctor_says_the_hub_cache_cannot_be_read_instead_of_failing(tmp_path, monkeypatch):
    """A shared cache this user may not list: one line saying so, where a traceback was."""
    import pathlib

    from huggingface_hub import constants

    (tmp_path / "hub").mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    def refused(self, pattern):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(pathlib.Path, "glob", refused)
    result = run_auditor("doctor")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert re.search(r"cached models \(0\) +cannot read .*hub \(Permission denied\)", result.stdout)


def test_no_help_text_shows_docstring_markup():
    """Help comes from the commands' docstrings: reStructuredText roles and double backticks there read as noise."""
    import click
    import typer

    from auditor.cli import app

    def helps(command: click.Command, path: list[str]):
        with click.Context(command, info_name=" ".join(path)) as context:
            yield " ".join(path), command.get_help(context)
        for name, sub in getattr(command, "commands", {}).items():
            yield from helps(sub, [*path, name])

    shown = dict(helps(typer.main.get_command(app), ["auditor"]))
    assert len(shown) > 15
    marked = [path for path, text in shown.items() if any(mark in text for mark in ("``", ":func:", ":class:", ":data:"))]
    assert marked == []


def test_ctrl_c_while_the_command_line_loads_is_one_line_not_a_traceback(tmp_path):
    """Loading typer, rich and the commands takes most of a second; a Ctrl-C then landed in a library's import and
    printed its traceback. The signal is sent once the import of typer is under way (``-X importtime`` says so)."""
    command = [sys.executable, "-X", "importtime", "-m", "auditor", "runs", "--runs-dir", str(tmp_path)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if line.rstrip().endswith("typer._click"):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130 and rest.endswith("error: interrupted\n"), rest
    assert "Traceback" not in rest


def test_the_readme_command_table_names_only_options_the_commands_take():
    """The README's command table is where people look up an option first: one it names that a command no longer
    takes (renamed, or moved to another command) is a doc that lies."""
    from pathlib import Path

    import typer

    from auditor.cli import app
    from tests.clitools import SOURCE_ROOT

    root = typer.main.get_command(app)
    rows = [line for line in (Path(SOURCE_ROOT) / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `auditor ")]  # fmt: skip
    assert len(rows) > 15
    wrong = []
    for row in rows:
        usage = row.split("`")[1]
        words = usage.split()[1:]
        command = root
        while words and words[0] in getattr(command, "commands", {}):
            command = command.commands[words.pop(0)]
        usage = re.sub(r"\bbut --[a-z-]+", "", usage)  # "[the options of auditor prompt but --review]"
        named = set(re.findall(r"(?<![\w-])--?[a-z][a-z0-9-]*", usage))
        taken = {option for parameter in command.params for option in parameter.opts + parameter.secondary_opts}
        wrong += [f"{command.name} {option}" for option in sorted(named - taken)]
    assert wrong == []


#: Runs the command line, ends as a shown result does (interruptions only noted from there on), and gets SIGTERM in
#: the interpreter's teardown, once Python has put the default handlers back: a module global's finalizer sends it.
SIGTERM_IN_TEARDOWN = """
import os, signal, sys

class SignalledAtTeardown:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        print("survived the signal", flush=True)

signalled = SignalledAtTeardown()
from auditor.cli import main
from auditor.commands.common import ignore_interruptions

sys.argv = ["auditor", "runs", "--runs-dir", sys.argv[1]]
try:
    main()
finally:
    ignore_interruptions()
"""


def test_a_sigterm_while_the_interpreter_tears_down_after_a_shown_result_does_not_kill_it(tmp_path):
    """Once the exit functions have run, Python puts the signals' defaults back and tears its modules down (most of a
    second with torch loaded): a scheduler's SIGTERM then killed a run that had ended and was recorded (exit 143, no
    word said). The command line's last exit function keeps such a signal ignored through the teardown."""
    from tests.clitools import SOURCE_ROOT

    environment = {**os.environ, "PYTHONPATH": SOURCE_ROOT}
    done = subprocess.run([sys.executable, "-c", SIGTERM_IN_TEARDOWN, str(tmp_path)], capture_output=True, text=True,
                          env=environment, timeout=120)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "survived the signal" in done.stdout and "Traceback" not in done.stderr
