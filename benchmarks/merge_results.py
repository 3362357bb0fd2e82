"""Pool the runs of several ``bench_audit.py`` sessions into one results file.

A lent GPU session has 15 minutes of device time, and one run of the 31 sets x 8 images comparison
takes about half of that (``benchmarks/gpu-session.sh compare``): three runs of every side take
several sessions.
Each session's file keeps its runs as measured (``runs``); this script pools them per model and
measurement and summarises them as ``bench_audit.py`` does, naming the files they came from.

Runs are pooled only where they measured the same thing, else it stops and says what differs:
the same GPU, Python and package versions; for each model, the same image size, steps, prompt
sets, images, questions (their wording too) and answer tokens; for each measurement, the same
code (the digests of ``code_kinds``) and, for auditor's side and the UNet, the same batch size
and optimisations. Every pooled run must have decoded the same token rows, as within one session.
A merged file may be merged again with later sessions; a session given twice (itself, or inside
a merged file) is refused, since its runs would count twice.

Usage: ``python benchmarks/merge_results.py SESSION.json ... --out benchmarks/results/<name>.json``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_audit import ALONE, code_kinds, print_table, same_decoded_rows, significant, summarise  # noqa: E402

#: What every pooled file must share.
SAME_SESSION = ("python", "versions", "device")
#: What every pooled file must share about one text-to-image model.
SAME_WORK = (
    "size_px", "steps", "prompt_sets", "images_per_set", "questions_per_image", "questions", "answer_tokens",
)  # fmt: skip
#: What a run records about how it ran, which must agree between pooled runs (auditor's side, the UNet, the VQA
#: sweep's images).
SAME_RUN = ("batch_size", "optimizations", "unet_batch", "images")


class Incomparable(ValueError):
    """Two sessions' runs measured different things; the message says what differs and where."""


def load_session(path: Path) -> dict:
    """A results file that keeps its runs: one session's (written by ``bench_audit.py`` since it records them and
    the code's digests) or a merged one (whose runs each name their session and code)."""
    try:
        session = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise Incomparable(f"{path}: not a results file ({exc})") from None
    if not isinstance(session, dict) or not isinstance(session.get("models"), dict):
        raise Incomparable(f"{path}: not a results file of bench_audit.py")
    entries = session["models"].values()
    has_questions = all("questions" in entry for entry in entries)
    kept = "merged_from" in session or ("code" in session and "session" in session)
    if not kept or not has_questions or any("runs" not in entry for entry in entries):
        raise Incomparable(
            f"{path}: written before bench_audit.py kept each run, the code's digests and the questions; it cannot be pooled"
        )
    return session


def sessions_of(name: str, results: dict) -> list[dict]:
    """The sessions whose runs ``results`` holds: itself, or those a merged file was pooled from."""
    if "merged_from" in results:
        return results["merged_from"]
    return [{"file": name, **{key: results[key] for key in ("session", "command", "date", "code")}}]


def merge(sessions: dict[str, dict], command: str) -> dict[str, Any]:
    """The sessions' runs pooled per model and measurement and summarised (``sessions``: file name -> contents)."""
    first_name, first = next(iter(sessions.items()))
    for name, session in sessions.items():
        for key in SAME_SESSION:
            _same(session[key], first[key], f"{key} of {name} and {first_name}")
    merged_from = [source for name, session in sessions.items() for source in sessions_of(name, session)]
    seen: dict[str, str] = {}
    for source in merged_from:
        if source["session"] in seen:
            raise Incomparable(
                f"the session of {source['file']} is given twice (also as {seen[source['session']]}): its runs would "
                "count twice"
            )
        seen[source["session"]] = source["file"]
    merged: dict[str, Any] = {
        "command": command,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **{key: first[key] for key in SAME_SESSION},
        "merged_from": merged_from,
        "models": {},
    }
    for name, session in sessions.items():
        for t2i, entry in session["models"].items():
            _pool(merged["models"], t2i, entry, name, session.get("code"))
    for entry in merged["models"].values():
        _summarise(entry)
    return merged


def _pool(models: dict[str, dict], t2i: str, entry: dict, source: str, code: dict[str, str] | None) -> None:
    """Add one file's runs of one model to the pooled ``models`` (``code``: a session's digests; None for a merged
    file, whose runs carry their own session and code)."""
    pooled = models.setdefault(t2i, {**{key: entry[key] for key in SAME_WORK}, "runs": {}, "errors": {},
                                     "left_out_for_budget": {}, "executors_same_answers": []})  # fmt: skip
    for key in SAME_WORK:
        _same(entry[key], pooled[key], f"{t2i}'s {key} in {source}")
    for measurement, runs in entry["runs"].items():
        for run in runs:
            if code is None:
                tagged = run
            else:
                tagged = {**run, "source": source, "code": {kind: code[kind] for kind in code_kinds(measurement)}}
            for earlier in pooled["runs"].get(measurement, []):
                where = f"{t2i} {measurement} in {tagged['source']} and {earlier['source']}"
                _same(tagged["code"], earlier["code"], f"code of {where}")
                for key in SAME_RUN:
                    _same(tagged.get(key), earlier.get(key), f"{key} of {where}")
            pooled["runs"].setdefault(measurement, []).append(tagged)
    for measurement, errors in entry.get("errors", {}).items():
        pooled["errors"].setdefault(measurement, []).extend(
            errors if code is None else [f"{source}: {errors}"]
        )  # a merged file's are already listed with their sessions
    for measurement, count in entry.get("left_out_for_budget", {}).items():
        pooled["left_out_for_budget"][measurement] = pooled["left_out_for_budget"].get(measurement, 0) + count
    if "executors_same_answers" in entry.get("checks", {}):
        pooled["executors_same_answers"].append(entry["checks"]["executors_same_answers"])


def _summarise(entry: dict) -> None:
    """The pooled runs' summaries and checks, in the shape of one session's."""
    timed = {name: runs for name, runs in entry["runs"].items() if name not in ALONE}
    entry["measurements"] = {}
    for name, pool_alone in (("unet", median_unet), ("vqa", median_vqa)):
        if name in entry["runs"]:
            entry["measurements"][name] = pool_alone(entry["runs"][name])
    entry["measurements"].update({name: summarise(runs, name) for name, runs in timed.items()})
    for name, measurement in entry["measurements"].items():
        measurement["sources"] = sorted({run["source"] for run in entry["runs"][name]})
    checks = same_decoded_rows(timed)
    if not checks["same_decoded_token_rows"]:
        raise Incomparable(f"the pooled runs decoded different work: {checks['decoded_token_rows']}")
    same_answers = entry.pop("executors_same_answers")
    if same_answers:  # compared within each session that ran both executors
        checks["executors_same_answers"] = all(same_answers)
    entry["checks"] = checks


def median_unet(runs: list[dict]) -> dict:
    """The UNet measurement of median speed (the lower of the two middle ones), with how many were pooled."""
    middle = statistics.median_low(run["achieved_tflops"] for run in runs)
    chosen = next(run for run in runs if run["achieved_tflops"] == middle)
    return {**{key: value for key, value in chosen.items() if key not in ("source", "code")}, "runs": len(runs)}


def median_vqa(runs: list[dict]) -> dict:
    """Per batch size that every pooled VQA sweep measured, the median pairs/s (and the most memory any used); a
    size that ran out of memory in any sweep stays so. Sweeps that gave a size's calls different numbers of images
    measured different work: they are not pooled."""
    sizes = [size for size in runs[0]["by_batch_size"] if all(size in run["by_batch_size"] for run in runs)]
    by_size: dict[str, Any] = {}
    for size in sizes:
        found = [run["by_batch_size"][size] for run in runs]
        if any(isinstance(value, str) for value in found):
            by_size[size] = "out of memory"
            continue
        memory = [value["peak_memory_gib"] for value in found if value["peak_memory_gib"] is not None]
        for value in found[1:]:
            _same(value.get("images_per_call"), found[0].get("images_per_call"), f"images per VQA call at {size} rows")
        by_size[size] = {
            "images_per_call": found[0].get("images_per_call"),
            "pairs_per_s": significant(statistics.median(value["pairs_per_s"] for value in found)),
            "decoded_token_rows": sorted({value["decoded_token_rows"] for value in found}),
            "peak_memory_gib": max(memory) if memory else None,
        }
    return {"images": runs[0]["images"], "pairs": runs[0]["pairs"], "by_batch_size": by_size, "runs": len(runs)}


def _same(value: Any, expected: Any, what: str) -> None:
    if value != expected:
        raise Incomparable(f"{what} differ: {value!r} and {expected!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="+", type=Path, help="Results files of bench_audit.py sessions.")
    parser.add_argument("--out", type=Path, required=True, help="Where to write the pooled results.")
    args = parser.parse_args(argv)
    if len(set(args.sessions)) != len(args.sessions):
        parser.error("a results file is named twice: its runs would be counted twice")
    try:
        sessions = {str(path): load_session(path) for path in args.sessions}
        merged = merge(sessions, " ".join([Path(sys.executable).name, *sys.argv]))
    except Incomparable as exc:
        print(f"merge_results: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(merged, indent=2) + "\n")
    for t2i, entry in merged["models"].items():
        print_table(t2i, entry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
