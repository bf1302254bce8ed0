"""The HTML report of a failing mutant run: one self-contained file that a real browser
(headless Chromium) renders with the failing run's finding, timeline and repro command."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from killpoint.harness.frontends._ci import ci_profile
from tests.helpers import DEMO, mutant_workload

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")


@pytest.fixture
def failing_report(killpoint, tmp_path) -> tuple[Path, dict]:
    """The HTML and JSON reports of the retry_non_idempotent mutant killed once mid-append."""
    result = killpoint("run", DEMO, "--workload", mutant_workload("retry_non_idempotent"), "--kill-at",
                       "c4:after_started", "--html", tmp_path / "report.html", "--json", tmp_path / "report.json")
    assert result.exit_code == 1, result.out + result.err
    (run,) = json.loads((tmp_path / "report.json").read_text())["runs"]
    return tmp_path / "report.html", run


def chromium() -> str:
    """The browser binary; missing is a skip locally but a failure in CI, where .ci/run installs it."""
    found = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if found is None:
        message = "headless Chromium is not installed (apt-get install -y chromium; .ci/run does it)"
        if ci_profile():
            pytest.fail(message)
        pytest.skip(message)
    return found


def browse(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *flags, page.as_uri()],
                              capture_output=True, text=True, timeout=120, check=True)


def test_the_report_is_one_self_contained_file(failing_report):
    page, run = failing_report
    html = page.read_text()
    for external in ("<script", "<link", "src=", "http://", "https://", "url("):
        assert external not in html, f"the report refers to something outside itself: {external}"
    assert html.count("<svg") == 1, "one timeline: the one failing run"
    assert f"killpoint repro {run['token']}" in html
    assert run["findings"][0]["property"] == "interrupted-action"


def test_headless_chromium_renders_the_failing_run(failing_report, tmp_path):
    page, run = failing_report
    dom = browse(page, "--dump-dom").stdout
    assert "FAIL run 0: kill at c4:after_started" in dom
    assert 'aria-label="timeline of run 0"' in dom and "UNKNOWN→RETRY" in dom
    for finding in run["findings"]:
        assert finding["property"] in dom
    assert "but incarnation 1 decided RETRY" in dom
    assert f"killpoint repro {run['token']}" in dom

    screenshot = tmp_path / "report.png"
    browse(page, f"--screenshot={screenshot}", "--window-size=1280,2000")
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1280, 2000)
    assert len(png) > 30_000, "the screenshot is nearly blank"
