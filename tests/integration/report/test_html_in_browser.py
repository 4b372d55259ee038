"""The HTML pages as a person sees them: loaded in a real headless Chromium, offline.

Each page must run its script without an error, draw every chart (marks with a visible bounding
box; the log-x twin of a chart is folded away until its button is pressed) and fetch nothing;
the bench page is also written as a screenshot.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from browser_testkit import load, screenshot
from html_testkit import (
    ab_document,
    doctor_document,
    make_records,
    read_page,
    summary_doc,
    sweep_document,
)

from ttft.report.html_bench import bench_page
from ttft.report.html_compare import compare_page
from ttft.report.html_doctor import doctor_page
from ttft.report.html_tune import tune_page

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _bench() -> str:
    records = make_records()
    return bench_page(summary_doc(records), records, generated="test")


def _compare() -> str:
    slow, fast = make_records(seed=1), make_records(seed=2)
    return compare_page(
        summary_doc(slow), summary_doc(fast), a_records=slow, b_records=fast, generated="test"
    )


PAGES: dict[str, Callable[[], str]] = {
    "bench": _bench,
    "compare": _compare,
    "tune-ab": lambda: tune_page(ab_document(), generated="test"),
    "tune-sweep": lambda: tune_page(sweep_document(), generated="test"),
    "doctor": lambda: doctor_page(doctor_document(), generated="test"),
}


@pytest.mark.parametrize("kind", sorted(PAGES))
def test_the_page_renders_every_chart_without_errors(kind: str, tmp_path: Path) -> None:
    text = PAGES[kind]()
    path = tmp_path / f"{kind}.html"
    path.write_text(text, encoding="utf-8")
    loaded = load(path, tmp_path / "profile")
    assert loaded.attribute("data-ready") == "1", loaded.dom[:500]
    assert loaded.attribute("data-js-errors", "html") is None
    assert loaded.console_errors == []
    charts = len(read_page(text).charts)
    assert charts > 0
    assert loaded.attribute("data-charts") == str(charts)
    drawn = int(loaded.attribute("data-charts-drawn") or 0)
    folded = int(loaded.attribute("data-charts-folded") or 0)
    assert drawn + folded == charts and drawn > folded


def test_a_script_error_is_caught(tmp_path: Path) -> None:
    """The check itself works: a page whose script fails is reported, twice over."""
    path = tmp_path / "broken.html"
    path.write_text(_bench().replace("</h1>", "</h1><script>no_such_function()</script>"))
    loaded = load(path, tmp_path / "profile")
    assert loaded.attribute("data-js-errors", "html") == "1"
    assert any("no_such_function" in line for line in loaded.console_errors)


def test_a_screenshot_is_written(tmp_path: Path) -> None:
    path = tmp_path / "bench.html"
    path.write_text(_bench(), encoding="utf-8")
    shot = tmp_path / "bench.png"
    screenshot(path, shot, tmp_path / "profile")
    data: Any = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
