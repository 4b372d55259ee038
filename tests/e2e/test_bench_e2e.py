"""`ttft bench` against the real embedded llama-server: lengths, phases, metrics, concurrency."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ttft.core.summary import BenchSummary
from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded
from ttft.load.runner import max_overlap
from ttft.load.session import SessionResult, run_session
from ttft.load.sink import read_results
from ttft.workload.arrival import ClosedLoop
from ttft.workload.spec import WorkloadSpec

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fresh_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SessionResult, RunningEngine]]:
    """One session on a freshly started engine: buckets 64 and 200, concurrency 1 and 3."""
    out = tmp_path_factory.mktemp("bench") / "records.jsonl"
    with launch_embedded(ctx_size=4096, parallel=3) as engine:
        target = Target(engine.base_url, engine.model_name, engine.metrics_url, "llamacpp")
        spec = WorkloadSpec(
            buckets=(64, 200),
            requests=3,
            max_tokens=2,
            warmup=1,
            arrivals=[ClosedLoop(1), ClosedLoop(3)],
        )
        result = run_session(target, spec, ServerTokenizer(target), out, fresh_server=True)
        yield result, engine


def test_prompt_lengths_hit_the_bucket_exactly(
    fresh_run: tuple[SessionResult, RunningEngine],
) -> None:
    result, _ = fresh_run
    measured = [r for r in result.records if r.phase == "warm"]
    assert len(measured) == 12
    for record in measured:
        bucket = int(record.cell.split()[0])
        assert record.prompt_tokens is not None
        assert record.prompt_tokens == bucket, (record.cell, record.prompt_tokens)


def test_first_request_after_start_is_reported_cold_and_apart(
    fresh_run: tuple[SessionResult, RunningEngine],
) -> None:
    result, _ = fresh_run
    phases = [r.phase for r in sorted(result.records, key=lambda r: r.index)]
    assert phases[0] == "cold" and phases[1] == "warmup"
    first_cell = result.summary.cells[0]
    assert first_cell.cold is not None and first_cell.cold.n == 1
    assert first_cell.n == 3 and first_cell.warmup == 1  # neither cold nor warm-up counted


def test_server_metric_deltas_match_what_was_sent(
    fresh_run: tuple[SessionResult, RunningEngine],
) -> None:
    """Per cell, the engine's prompt-token counter moved by the uncached tokens the responses
    report (timings.prompt_n), and its generated-token counter by max_tokens per request."""
    result, _ = fresh_run
    for cell in result.bench.cells:
        if cell.plan.phase != "warm":
            continue
        assert cell.server is not None
        metrics = cell.server["metrics"]
        sent_uncached = sum(int((r.server_timings or {}).get("prompt_n", 0)) for r in cell.records)
        assert metrics["prompt_tokens"]["value"] == sent_uncached
        assert metrics["generation_tokens"]["value"] == 2 * len(cell.records)
        assert "kv_cache_usage" in cell.server["unavailable"]


def test_concurrency_levels_are_honoured(fresh_run: tuple[SessionResult, RunningEngine]) -> None:
    result, _ = fresh_run
    by_cell = {c.plan.cell: c for c in result.bench.cells if c.plan.phase == "warm"}
    assert max_overlap(by_cell["200 tok c=1"].records) == 1
    assert max_overlap(by_cell["200 tok c=3"].records) == 3
    peak = by_cell["200 tok c=3"].peaks.get("requests_running", 0)
    assert peak >= 2  # the server saw them together, too (sampled, so >= 2 not == 3)


def test_results_file_holds_every_record_and_the_summary_round_trips(
    fresh_run: tuple[SessionResult, RunningEngine],
) -> None:
    result, _ = fresh_run
    loaded = read_results(result.results_path)
    assert loaded.finished and loaded.damaged_lines == 0
    assert len(loaded.records) == len(result.records) == 14
    again = BenchSummary.from_dict(json.loads(json.dumps(result.summary.to_dict())))
    assert [c.cell for c in again.cells] == [c.cell for c in result.summary.cells]


def _ttft(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ttft.cli.main import main; main()", *args]


def test_cli_writes_files_and_gates_on_a_failed_slo(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    """An impossible SLO (TTFT p50 under 1 microsecond) fails the run with exit code 1."""
    out = tmp_path / "run"
    done = subprocess.run(
        _ttft(
            "bench",
            "--url",
            embedded_server.base_url,
            "--buckets",
            "48",
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--out",
            str(out),
            "--slo",
            "ttft:p50<1us",
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    for name in ("records.jsonl", "summary.json", "summary.csv", "summary.md"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "ttft.bench.summary/1"
    assert "FAIL" in done.stdout


def test_cli_bad_options_are_clear_errors(embedded_server: RunningEngine) -> None:
    for args, expected in [
        (("--buckets", "512,abc"), "not a comma-separated list"),
        (("--slo", "ttft<600ms"), "SLO"),
        (("--shared-prefix", "1200"), "is not P:S"),
        (("--prompt-file", "/nonexistent.jsonl"), "not found"),
    ]:
        done = subprocess.run(
            _ttft("bench", "--url", embedded_server.base_url, "--requests", "1", *args),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr and "Traceback" not in done.stderr


def test_unreachable_url_is_a_clear_error() -> None:
    done = subprocess.run(
        _ttft("bench", "--url", "http://127.0.0.1:9", "--requests", "1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "cannot reach" in done.stderr


def test_a_killed_run_leaves_a_readable_results_file(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    """SIGKILL mid-run: every line on disk parses, and the finished requests are all there."""
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        _ttft(
            "bench",
            "--url",
            embedded_server.base_url,
            "--buckets",
            "300",
            "--concurrency",
            "1",
            "--requests",
            "40",
            "--warmup",
            "0",
            "--out",
            str(out),
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    records = out / "records.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if records.exists() and records.read_text().count('"type":"request"') >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    loaded = read_results(records)
    assert len(loaded.records) >= 3 and not loaded.finished
    assert all(r.ok for r in loaded.records)
    assert loaded.damaged_lines <= 1


def test_cold_mode_restarts_the_engine_for_every_sample(tmp_path: Path) -> None:
    """Each cold sample is a fresh process's first request: nothing comes from the cache."""
    done = subprocess.run(
        _ttft("bench", "--cold", "2", "--buckets", "64", "--out", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    loaded = read_results(tmp_path / "records.jsonl")
    assert [r.phase for r in loaded.records] == ["cold", "cold"]
    assert all(r.ok and r.cached_tokens == 0 for r in loaded.records)
    assert "engine start-up to healthy" in done.stderr


def test_cold_mode_refuses_a_server_it_cannot_restart(embedded_server: RunningEngine) -> None:
    done = subprocess.run(
        _ttft("bench", "--cold", "2", "--url", embedded_server.base_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "needs an engine ttft manages" in done.stderr


def test_a_bucket_longer_than_the_servers_context_is_refused_up_front(
    embedded_server: RunningEngine,
) -> None:
    """The session server has 8192 tokens over 4 slots: 2048 per request."""
    done = subprocess.run(
        _ttft(
            "bench", "--url", embedded_server.base_url, "--buckets", "512,4000", "--requests", "1"
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "exceed the server's context of 2048 tokens" in done.stderr


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_every_bucket_prompt_is_the_bucket_as_the_server_counts_it(
    embedded_server: RunningEngine, api: str
) -> None:
    """Prompts are counted in their frame, as the server renders and tokenizes them: with the
    embedded engine's ChatML template a content that ends in "." loses a token to the seam
    (".<" of "<|im_end|>"), so a content cut to the bucket less the template's tokens would be
    one short for some of these prompts. Counted without running the model."""
    from ttft.engines.control import ControlClient
    from ttft.load.calibrate import prompt_frame
    from ttft.workload.builders import length_buckets
    from ttft.workload.exact_length import text_of_tokens

    target = Target(embedded_server.base_url, embedded_server.model_name, None, "llamacpp")
    tokenizer = ServerTokenizer(target)
    frame = prompt_frame(target, tokenizer, "chat" if api == "chat" else "completions")
    assert frame is not None and frame.count is not None
    items = length_buckets(tokenizer, [40, 64], 24, frame=frame, seed="e2e-frame",
                           api="chat" if api == "chat" else "completions")  # fmt: skip
    client = ControlClient(target)
    seam = 0
    for n, item in enumerate(items):
        if api == "chat":
            content = item.body["messages"][0]["content"]
            prompt = client.apply_template(item.body["messages"])
            assert prompt is not None
        else:
            content = prompt = item.body["prompt"]
        assert len(client.tokenize(prompt, add_special=True)) == int(item.bucket), content
        bucket = int(item.bucket)
        naive = text_of_tokens(tokenizer, bucket - frame.overhead, f"e2e-frame/{bucket}/{n % 24}")
        seam += frame.count(naive) != bucket
    if api == "chat":
        assert seam > 0  # the merge this test is about did happen among these prompts


def test_a_prompt_file_run_finds_nothing_an_earlier_run_left_in_the_prefix_cache(
    tmp_path: Path,
) -> None:
    """The same prompt file, three runs against one engine that keeps its cache (one slot,
    --swa-full): given the first run's seed back, the second is served from the cache (so the
    engine and the record do show a hit); the third, with a seed of its own, computes the
    prompt again, because its prompt starts with its own run mark (without the mark the third
    run was a cache hit too)."""
    text = " ".join(f"Line {i} of a support bot's long and fixed system prompt." for i in range(30))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"messages": [{"role": "user", "content": text}]}) + "\n")

    def run(name: str, *seed: str) -> tuple[str, dict[str, int]]:
        out = tmp_path / name
        done = subprocess.run(
            _ttft("bench", "--url", engine.base_url, "--prompt-file", str(prompts),
                  "--requests", "1", "--warmup", "0", "--concurrency", "1", "--out", str(out),
                  *seed),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        (record,) = [x["record"] for x in lines if x["type"] == "request"]
        summary = json.loads((out / "summary.json").read_text())
        return summary["meta"]["seed"], record

    with launch_embedded(ctx_size=2048, parallel=1, extra_args=("--swa-full",)) as engine:
        seed, first = run("first")
        _, again = run("again", "--seed", seed)
        _, fresh = run("fresh")
    assert first["prompt_tokens"] > 300
    assert again["cached_tokens"] >= first["prompt_tokens"] - 2, again  # the same prompt: a hit
    # what precedes the mark's digest is shared (the template's "<|im_start|>user\n" and "["):
    # ten tokens here, of the prompt's 360
    assert fresh["cached_tokens"] <= 16, fresh
