"""``ttft report``'s reader: any saved result renders, the same as the command that wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from html_testkit import (
    ab_document,
    doctor_document,
    make_records,
    mask_generated,
    read_page,
    summary_doc,
)

from ttft.cli.main import cli
from ttft.core.errors import TtftError
from ttft.report.html_bench import bench_page
from ttft.report.saved import read_records, render_saved


def _bench_dir(root: Path) -> Path:
    records = make_records()
    root.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"type": "run", "schema": "ttft.bench.results/1"})]
    lines += [json.dumps({"type": "request", "record": r.to_dict()}) for r in records]
    (root / "records.jsonl").write_text("\n".join(lines) + '\n{"type": "requ')  # torn tail
    (root / "summary.json").write_text(json.dumps(summary_doc(records), indent=2))
    return root


def test_a_bench_folder_renders_like_the_page_bench_writes(tmp_path: Path) -> None:
    folder = _bench_dir(tmp_path / "run")
    records = read_records(folder / "records.jsonl")
    assert len(records) == len(make_records())
    direct = bench_page(summary_doc(make_records()), records, generated="T", source="summary.json")
    assert render_saved(folder, generated="T") == direct
    assert render_saved(folder / "summary.json", generated="T") == direct


def test_a_bare_records_file_is_summarized(tmp_path: Path) -> None:
    folder = _bench_dir(tmp_path / "run")
    text = render_saved(folder / "records.jsonl", generated="T")
    assert 'data-chart="ttft-cdf"' in text and 'data-chart="timeline"' in text


@pytest.mark.parametrize("make", [ab_document, doctor_document])
def test_tune_and_doctor_documents_render(tmp_path: Path, make: object) -> None:
    assert callable(make)
    path = tmp_path / "x.json"
    path.write_text(json.dumps(make()))
    assert '<svg class="chart"' in render_saved(path, generated="T")


def test_what_is_not_a_result_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text('{"schema": "something/9"}')
    with pytest.raises(TtftError, match="not a result this version renders"):
        render_saved(tmp_path / "other.json")
    with pytest.raises(TtftError, match="holds no ttft result"):
        render_saved(tmp_path)
    with pytest.raises(TtftError, match="not found"):
        render_saved(tmp_path / "missing.json")


def test_ttft_report_writes_the_page_into_the_folder(tmp_path: Path) -> None:
    folder = _bench_dir(tmp_path / "run")
    result = CliRunner().invoke(cli, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    first = (folder / "report.html").read_text()
    out = tmp_path / "again.html"
    assert CliRunner().invoke(cli, ["report", str(folder), "--html", str(out)]).exit_code == 0
    assert mask_generated(out.read_text()) == mask_generated(first)


def test_the_compare_page_pairs_the_cdfs_and_its_deltas_are_the_comparison() -> None:
    from ttft.core.compare import compare_json
    from ttft.report.html_compare import compare_page

    slow, fast = make_records(seed=1), make_records(seed=2)
    a, b = summary_doc(slow), summary_doc(fast)
    text = compare_page(a, b, a_records=slow, b_records=fast, generated="T")
    page = read_page(text)
    assert len(page.charts) == 12 and all(page.charts.values())  # 6 cells x (warm, cold), max 12
    rows = compare_json(a, b).rows
    expected = [v for r in rows for v in (r.a, r.b, r.delta)]
    assert [json.loads(value) for _, _, value in page.cells] == expected
