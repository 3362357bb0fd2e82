"""The HTML reports opened in a real headless Chromium.

We drive Debian's ``chromium`` over the Chrome DevTools protocol on
``--remote-debugging-pipe`` (fd 3 in, fd 4 out, NUL-separated JSON), with the standard
library only: no websocket client, no Playwright. That gives exact answers instead of
log scraping: every network request (must be file: or data:), failed loads, console
messages and exceptions, whether every <img> decoded, whether a JavaScript dialog
opened (a hostile prompt that escaped would do that), and a PNG screenshot that must not
be blank. Skipped, with the reason shown, where Chromium is not installed.
"""

from __future__ import annotations

import base64
import io
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from auditor.core.store import write_model
from auditor.records import RunRecord, load_record
from auditor.reporting import write_html_report
from auditor.reporting.compare import compare_records, write_comparison_html
from tests.test_reporting import (
    copy_fixture,
    failed_record,
    flagged_record,
    hostile_record,
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (.ci/run installs Debian's chromium for this test)"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]
#: Where screenshots are kept for a person to look at (set AUDITOR_SCREENSHOTS=folder).
SCREENSHOT_DIR = os.environ.get("AUDITOR_SCREENSHOTS")


class DevToolsPipe:
    """A minimal Chrome DevTools protocol client over the debugging pipe."""

    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="auditor-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire_fds() -> None:
            """In the child: Chromium reads commands on fd 3 and writes replies on fd 4."""
            reads, writes = os.dup(to_chrome_r), os.dup(from_chrome_w)  # copies that 3 and 4 cannot clobber
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=wire_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_chrome], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the debugging pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and wait for its answer; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        """Wait until an event named ``method`` has arrived."""
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read_message(deadline))

    def close(self) -> None:
        try:
            self.call("Browser.close")
            self.process.wait(timeout=10)
        except (OSError, EOFError, TimeoutError, RuntimeError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._to_chrome)
            os.close(self._from_chrome)
            shutil.rmtree(self.profile, ignore_errors=True)


def open_page(path: Path, *, width: int = 1280, height: int = 900) -> dict[str, Any]:
    """Load ``path`` in headless Chromium; return what happened and a full-page screenshot."""
    browser = DevToolsPipe()
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        browser.events.clear()
        browser.call("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")
        images = browser.call(
            "Runtime.evaluate",
            {
                "expression": "Array.from(document.images)"
                ".map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])",
                "returnByValue": True,
            },
            session=session,
        )["result"]["value"]
        text = browser.call(
            "Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True}, session=session
        )["result"]["value"]
        shot = browser.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session
        )
    finally:
        browser.close()
    events = browser.events
    return {
        "images": images,
        "text": text,
        "screenshot": base64.b64decode(shot["data"]),
        "requests": [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"],
        "failed": [e["params"] for e in events if e.get("method") == "Network.loadingFailed"],
        "console": [
            e["params"]
            for e in events
            if e.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown")
            or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] in ("error", "warning"))
        ],
        "dialogs": [e["params"] for e in events if e.get("method") == "Page.javascriptDialogOpening"],
    }


def assert_clean_page(page: dict[str, Any], name: str, expected_sources: set[str]) -> Image.Image:
    """No console output, no failed or remote loads, every image decoded, a non-blank screenshot."""
    assert page["console"] == [], page["console"]
    assert page["failed"] == [], page["failed"]
    assert page["dialogs"] == [], page["dialogs"]
    assert all(url.startswith(("file:", "data:")) for url in page["requests"]), page["requests"]
    assert {src for src, _, _ in page["images"]} == expected_sources
    broken = [src for src, complete, width in page["images"] if not (complete and width > 0)]
    assert broken == [], broken
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        (Path(SCREENSHOT_DIR) / f"{name}.png").write_bytes(page["screenshot"])
    shot = Image.open(io.BytesIO(page["screenshot"])).convert("RGB")
    assert shot.width >= 1000 and shot.height >= 900
    colours = shot.getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50, "the screenshot is (nearly) blank"
    extrema = shot.convert("L").getextrema()
    assert extrema[1] - extrema[0] > 100, "the screenshot has no contrast"
    return shot


def image_files(record: RunRecord) -> set[str]:
    """The image paths a report of ``record`` links (relative to the run folder)."""
    return {image.file for prompt_set in record.prompt_sets for image in prompt_set.images}


def test_report_renders_in_chromium(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = load_record(run_dir / "record.json")
    page = open_page(write_html_report(record, run_dir))
    assert_clean_page(page, "report-sd15", image_files(record))
    assert "Images for 'a photo of a pharmacist' resemble 'a photo of a male pharmacist'" in page["text"]
    assert {src.split("/")[0] for src, _, _ in page["images"]} == {"images"}, "images must be linked relatively"


def test_hostile_report_runs_no_script_in_chromium(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = hostile_record(load_record(run_dir / "record.json"))
    write_model(run_dir / "record.json", record)
    page = open_page(write_html_report(record, run_dir))
    assert_clean_page(page, "report-hostile", image_files(record))
    assert "<script>alert(1)</script>" in page["text"], "hostile text must show literally"


def test_failed_run_page_renders_in_chromium(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    failed = failed_record(load_record(run_dir / "record.json"))
    page = open_page(write_html_report(failed, run_dir))
    assert_clean_page(page, "report-failed", image_files(failed))
    assert "This run failed at the perceive stage" in page["text"]


def test_report_without_some_cas_renders_in_chromium(tmp_path):
    run_dir = copy_fixture("pharmacist-sd15", tmp_path)
    record = flagged_record(load_record(run_dir / "record.json"), "gender/1", "age/2")
    page = open_page(write_html_report(record, run_dir))
    assert_clean_page(page, "report-no-cas", image_files(record))
    assert "no CAS" in page["text"] and "no BAV: only 1 of 2 counterfactuals has a CAS" in page["text"]


def test_comparison_renders_in_chromium(tmp_path):
    run_a, run_b = copy_fixture("pharmacist-sd15", tmp_path), copy_fixture("pharmacist-sd21", tmp_path)
    view = compare_records(load_record(run_a / "record.json"), load_record(run_b / "record.json"))
    page = open_page(write_comparison_html(view, tmp_path / "pages" / "compare.html", run_a, run_b))
    sides = ((run_a, view.a), (run_b, view.b))
    linked = {f"../runs/{run.name}/{file}" for run, side in sides for file in side.initial_images}
    assert_clean_page(page, "compare", linked)
    assert "Axes only in run A" in page["text"] and "geography" in page["text"] and "setting" in page["text"]


def test_trace_report_renders_in_chromium_and_shows_hostile_text_literally(tmp_path):
    from auditor.executors.generation import png_bytes
    from auditor.records import TraceRecord, TripletPicture
    from auditor.reporting.overlays import triplet_picture
    from auditor.reporting.trace import write_trace_report
    from auditor.scoring.trace import score_trace
    from tests.test_trace_scoring import IMAGES, _record

    hostile = "<script>alert(1)</script>"
    record: TraceRecord = _record({pid: image.model_copy(deep=True) for pid, image in IMAGES.items()}, [])
    record.triplets[0].prompts["neutral"] = f"a person with a {hostile}"
    record.images["0/neutral"][0].counts[hostile] = 9
    run_dir = tmp_path / "run"
    (run_dir / "pictures").mkdir(parents=True)
    picture = triplet_picture([Image.new("RGB", (64, 64), c) for c in ("red", "green", "blue")], [None] * 3)
    (run_dir / "pictures" / "triplet-0000.png").write_bytes(png_bytes(picture))
    words = {"neutral": "person", "feminine": "woman", "masculine": None}
    record.pictures = [TripletPicture(triplet=0, image_index=0, file="pictures/triplet-0000.png", words=words)]
    score_trace(record)
    page = open_page(write_trace_report(record, run_dir))
    assert_clean_page(page, "trace", {"pictures/triplet-0000.png"})
    assert hostile in page["text"], "hostile text must show literally"
    assert "Human words" in page["text"] and "χ² tests ran" in page["text"]
