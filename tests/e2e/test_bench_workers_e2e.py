"""`ttft bench --workers 2` against the real embedded llama-server: two client processes, one
merged result with the single-process schema and counts, and a client-health verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ttft.engines.llamacpp.embedded import RunningEngine

pytestmark = pytest.mark.e2e


def _bench(engine: RunningEngine, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-m", "ttft", "bench", "--url", engine.base_url, "--buckets", "48",
        "--concurrency", "4", "--requests", "8", "--max-tokens", "2", "--out", str(out),
        *extra,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def _keys(value: object) -> object:
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items() if k not in ("client_workers", "notes")}
    if isinstance(value, list):
        return [_keys(value[0])] if value else []
    return None


def test_two_client_processes_against_the_real_engine_merge_into_one_run(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    single = _bench(embedded_server, tmp_path / "one")
    assert single.returncode == 0, single.stderr[-3000:]
    many = _bench(embedded_server, tmp_path / "two", "--workers", "2")
    assert many.returncode == 0, many.stderr[-3000:]
    assert "client workers (processes, 2):" in many.stderr
    a = json.loads((tmp_path / "one" / "summary.json").read_text())
    b = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert _keys(a) == _keys(b)
    [cell] = b["cells"]
    assert cell["n"] == a["cells"][0]["n"] == 8 and cell["ok"] == 8
    assert {w["worker"] for w in cell["client_health"]["workers"]} == {"w0", "w1"}
    # Judged, with its reason; not asserted healthy: the engine shares these 2 cores with the
    # client (the healthy case is pinned against the scripted server).
    assert b["client_health"]["level"] in ("healthy", "suspect", "invalid")
    assert b["client_health"]["reason"] and cell["client_health"]["checks"]
    records = (tmp_path / "two" / "records.jsonl").read_text().count('"type":"request"')
    assert records == 9  # the warm-up request and the cell's eight
    # Real prompts of 48 tokens were prefilled by the engine in both runs.
    assert cell["metrics"]["prompt_tokens"]["p50"] == pytest.approx(48, abs=1)
