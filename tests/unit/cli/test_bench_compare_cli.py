"""`ttft bench compare`: two summary files in, per-cell differences out; bad files explained."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ttft.cli.bench import bench
from ttft.core.records import RequestRecord
from ttft.core.summary import summarize_run

MS = 1_000_000


def _summary_file(path: Path, ttft_ms: float) -> Path:
    records = [
        RequestRecord(
            index=i,
            cell="512 tok c=1",
            sent_ns=0,
            first_content_ns=int((ttft_ms + i % 5) * MS),
            done_ns=int(ttft_ms * 2 * MS),
        )
        for i in range(40)
    ]
    path.write_text(json.dumps(summarize_run(records).to_dict()))
    return path


def test_compare_shows_each_cell_and_a_real_change(tmp_path: Path) -> None:
    a = _summary_file(tmp_path / "a.json", 800)
    b = _summary_file(tmp_path / "b.json", 400)
    result = CliRunner().invoke(bench, ["compare", str(a), str(b), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert "512 tok c=1" in result.output and "ttft" in result.output


def test_compare_names_a_file_that_is_not_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    good = _summary_file(tmp_path / "a.json", 800)
    result = CliRunner().invoke(bench, ["compare", str(bad), str(good)])
    assert result.exit_code != 0
    assert "bad.json is not JSON" in str(result.exception) or "bad.json" in result.output


def test_fail_on_regression_exits_1_when_b_is_slower_beyond_noise(tmp_path: Path) -> None:
    fast = _summary_file(tmp_path / "fast.json", 400)
    slow = _summary_file(tmp_path / "slow.json", 800)
    worse = CliRunner().invoke(bench, ["compare", str(fast), str(slow), "--fail-on-regression"])
    assert worse.exit_code == 1
    better = CliRunner().invoke(bench, ["compare", str(slow), str(fast), "--fail-on-regression"])
    assert better.exit_code == 0


def test_cells_with_too_few_samples_are_never_called_real(tmp_path: Path) -> None:
    from ttft.core.compare import TOO_FEW, compare

    def one(ttft_ms: float) -> Any:
        record = RequestRecord(
            index=0,
            cell="c",
            sent_ns=0,
            first_content_ns=int(ttft_ms * MS),
            done_ns=int(ttft_ms * MS) + 1,
        )
        return summarize_run([record])

    rows = compare(one(100), one(900)).rows
    assert rows and all(r.verdict == TOO_FEW and r.improved is None for r in rows)
