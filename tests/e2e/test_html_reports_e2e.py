"""The HTML reports of real runs on the embedded engine, as a person opens them: headless Chromium,
offline. ``ttft bench --html`` and ``ttft doctor --html`` write pages that run their script without
an error and draw every chart; ``ttft report`` on the saved folder gives the same page apart from
the generation time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser_testkit import load, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def ttft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ttft", *args], capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip


def _opens_and_draws(page: Path, profile: Path) -> None:
    loaded = load(page, profile)
    assert loaded.attribute("data-ready") == "1", loaded.dom[:500]
    assert loaded.attribute("data-js-errors", "html") is None
    assert loaded.console_errors == []
    charts = int(loaded.attribute("data-charts") or 0)
    drawn = int(loaded.attribute("data-charts-drawn") or 0)
    folded = int(loaded.attribute("data-charts-folded") or 0)
    assert charts > 0 and drawn + folded == charts and drawn > folded, (charts, drawn, folded)


def _without_stamp(text: str) -> str:
    return re.sub(r"generated [^<]*", "generated", text)


def test_a_real_bench_run_renders_in_a_browser_and_report_rebuilds_it(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    done = ttft("bench", "--buckets", "64,256", "--concurrency", "1,2", "--requests", "6",
                "--max-tokens", "8", "--out", str(out), "--html")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    page = out / "report.html"
    _opens_and_draws(page, tmp_path / "profile")
    shot = tmp_path / "bench.png"
    screenshot(page, shot, tmp_path / "profile")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = tmp_path / "again.html"
    rebuilt = ttft("report", str(out), "--html", str(again))
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    assert _without_stamp(again.read_text()) == _without_stamp(page.read_text())


def test_a_real_doctor_run_renders_in_a_browser(tmp_path: Path) -> None:
    out = tmp_path / "doctor"
    done = ttft("doctor", "--budget", "2", "--out", str(out), "--html")
    assert done.returncode in (0, 1), done.stderr[-2000:]
    _opens_and_draws(out / "report.html", tmp_path / "profile")
