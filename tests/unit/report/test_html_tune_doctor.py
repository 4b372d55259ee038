"""The tune (A/B and sweep) and doctor pages: their charts, and tables equal to the JSON."""

from __future__ import annotations

import json

from html_testkit import ab_document, doctor_document, read_page, resolve, sweep_document

from ttft.report.html_doctor import doctor_page
from ttft.report.html_tune import pareto_series, tune_page, waterfall_bars


def _same_numbers(doc: dict[str, object], text: str) -> int:
    cells = read_page(text).cells
    for _, key, value in cells:
        assert json.loads(value) == resolve(doc, key), key
    return len(cells)


def test_the_ab_waterfall_has_the_baseline_each_step_and_the_final_result() -> None:
    doc = ab_document()
    bars = waterfall_bars(doc)
    assert [b.label for b in bars] == [
        "baseline",
        "+move-dynamic",
        "+-ub 256",
        "+-np 4",
        "final",
    ]
    baseline, gain, no_effect, regressed, final = bars
    assert baseline.base == 0 and baseline.low is not None and baseline.high is not None
    assert baseline.low <= baseline.value <= baseline.high
    assert abs(gain.base - baseline.value) < 1.0  # floats from where the baseline ended
    assert gain.color != no_effect.color != regressed.color
    assert final.value == doc["total"]["final_p50_ms"]  # type: ignore[index]


def test_the_ab_page_draws_its_chart_and_its_table_is_the_json() -> None:
    doc = ab_document()
    text = tune_page(doc, generated="now")
    page = read_page(text)
    assert page.charts["attribution"] == 5
    assert _same_numbers(doc, text) >= 4 * 5
    assert "undone (regressed): steps 3" in text


def test_the_sweep_page_has_the_pareto_plot_and_each_load_search() -> None:
    doc = sweep_document()
    text = tune_page(doc, generated="now")
    page = read_page(text)
    assert set(page.charts) == {"pareto", "load-goodput", "load-ttft"}
    assert all(page.charts.values())
    assert page.charts["load-goodput"] >= 3 * 4  # every level of every started configuration
    assert _same_numbers(doc, text) > 0
    assert "SLO ttft:p99&lt;900ms" in text and "engine did not start" in text


def test_the_pareto_front_is_its_own_series() -> None:
    series = {s.name: s for s in pareto_series(sweep_document())}
    assert series["Pareto front"].line
    front = series["Pareto front"].points
    assert front == sorted(front)


def test_the_doctor_page_shows_each_finding_with_its_evidence_chart() -> None:
    doc = doctor_document()
    text = doctor_page(doc, generated="now")
    page = read_page(text)
    assert page.charts["evidence-1"] == 2  # the two ms-valued evidence items, not the text one
    assert "gzip" in text and "no request log given" in text
    assert _same_numbers(doc, text) == 2  # each step's seconds
    assert page.sources == []


def test_a_healthy_report_says_so() -> None:
    doc = doctor_document() | {"healthy": True, "findings": []}
    assert "Healthy: no finding" in doctor_page(doc, generated="now")
