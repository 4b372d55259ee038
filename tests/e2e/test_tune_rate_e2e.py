"""``ttft tune sweep --load rate`` on the real embedded llama-server: the open-loop search of
the highest arrival rate each configuration holds, ``-np 1`` against ``-np 4``.

Tiny prompts (a ~40-token shared system prompt, 6-word questions), 4 answer tokens, levels of
about 3 s of Poisson arrivals; the assertion compares the two configurations' best rates, never
absolute times. Every engine the sweep starts inherits a marker in its environment, so "no
llama-server remains" is checked on exactly those processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from process_testkit import wait_gone

pytestmark = pytest.mark.e2e

MARKER = "TTFT_TUNE_RATE_E2E"


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, value)
    yield value
    assert wait_gone(MARKER, value) == [], "a llama-server outlived its trial"


def _levels(trial: dict[str, Any]) -> str:
    return ", ".join(
        f"{lv['rate']:g}/s: p99 {lv['ttft_p99_ms'] or 0:.0f} ms, goodput {lv['goodput_per_s']:.2f}"
        f"/s, lag p50 {lv['client_lag_p50_ms']:.1f} ms, {'held' if lv['slo_passed'] else 'broke'}"
        for lv in trial["levels"]
    )


def test_rate_sweep_ranks_configurations_by_the_highest_rate_they_held(
    tmp_path: Path, marker: str, engine_threads: int
) -> None:
    out = tmp_path / "rate"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    argv = [
        sys.executable, "-c", "from ttft.cli.main import main; main()",
        "tune", "sweep", "--param", "-np=1,4", "--load", "rate",
        "--start-rate", "1", "--max-rate", "8", "--rate-tolerance", "0.2",
        "--level-seconds", "3", "--requests", "4", "--slo", "ttft:p99<1s",
        "--prefix-words", "30", "--suffix-words", "6", "--max-tokens", "4",
        "--threads", str(engine_threads), "--per-slot-ctx", "512", "--out", str(out),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "ttft.tune.sweep/1" and summary["load"] == "rate"
    trials = {t["config"]["-np"]: t for t in summary["trials"]}
    assert set(trials) == {"1", "4"} and all(t["status"] == "ok" for t in trials.values())
    for trial in trials.values():
        rates = [lv["rate"] for lv in trial["levels"]]
        assert rates[:2] == [1, 2], rates  # doubling from --start-rate
        assert all(lv["n"] >= max(4, 3 * lv["rate"]) for lv in trial["levels"])
    one, four = trials["1"]["best"], trials["4"]["best"]
    found = (
        f"in {elapsed:.0f} s: -np 1 held {one and one['rate']}/s [{_levels(trials['1'])}]; "
        f"-np 4 held {four and four['rate']}/s [{_levels(trials['4'])}]"
    )
    print(found)
    assert one is not None and four is not None, found
    # The ranking follows the rates held: the chosen configuration held the highest.
    top = max(trials.values(), key=lambda t: (t["best"]["rate"], t["best"]["goodput_per_s"]))
    assert summary["table"][0]["config"] == f"-np {top['config']['-np']}", found
    best_load = summary["table"][0]["best_load"]  # e.g. 4.5/s
    assert best_load.endswith("/s"), best_load
    assert float(best_load[:-2]) == pytest.approx(top["best"]["rate"]), found
    assert f"chosen: -np {top['config']['-np']}" in done.stdout
    # Which configuration holds more is the machine's to say, not this test's: on 2 shared cores
    # with 4-token answers -np 1 held 6.0/s against -np 4's 4.5/s in one run and the reverse in
    # another (prefill, not the decode batching -np 4 adds, is most of the work; docs/tune.md).
