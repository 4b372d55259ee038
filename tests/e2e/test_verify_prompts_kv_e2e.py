"""`verify quality` on the real embedded llama-server with a request log: the user's own prompts
become a "your prompts" row (asked through the chat endpoint, compared by token id with top-k
KL), a prompt over the window is skipped and counted, and the KV memory each engine reported
in its start-up log goes into the trade line (q8_0 holds less than f16).

Bounded: one 256-token probe, two short logged prompts, eight greedy tokens, two engines one
after the other (~30-60 s on 2 shared cores).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli
from ttft.core.target import Target
from ttft.engines.llamacpp.embedded import RunningEngine
from ttft.verify import QualityOptions, parse_side, run_quality
from ttft.verify.collect import engine_kind

pytestmark = pytest.mark.e2e


def test_logged_prompts_get_their_own_row_and_kv_memory_enters_the_trade(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    bodies = [
        {"messages": [{"role": "user", "content": "The capital of France is"}], "max_tokens": 99},
        {"messages": [{"role": "user", "content": "Count: one, two, three,"}], "temperature": 1},
        # far over the 256 + 8 + 16 token window the embedded sides get from --lengths 256
        {"messages": [{"role": "user", "content": "word " * 900}]},
    ]
    log.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    args = [
        "verify",
        "quality",
        "--candidate",
        "embedded:-ctk=q8_0,-ctv=q8_0",
        "--lengths",
        "256",
        "--samples",
        "1",
        "--tokens",
        "8",
        "--threads",
        "2",
        "--requests-log",
        str(log),
        "--format",
        "json",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    report = json.loads(result.stdout)
    mine = report["your_prompts"]
    assert mine is not None and mine["label"] == "your prompts"
    assert mine["samples"] == 2  # the long one was skipped
    assert mine["recall_baseline"] is None  # nothing planted in the user's prompts
    # llama-server's chat endpoint gives ids and top-k: the divergence is measured, not skipped
    assert mine["mean_kl"] is not None and mine["top1_agreement"] is not None
    assert any("1 of 3 logged prompts are longer than the window" in n for n in report["notes"])
    kv = report["kv_mib"]
    # q8_0 stores 8.5 bits per value where f16 stores 16: a bit over half the memory
    assert 0.4 < kv["candidate"] / kv["baseline"] < 0.6, kv
    assert "less KV memory" in report["trade"] and "your prompts" in report["trade"]


def test_a_running_llama_server_given_by_url_is_asked_natively_and_its_memory_is_unknown(
    embedded_server: RunningEngine,
) -> None:
    """A URL side is recognised as llama-server by its /props (so it gets /completion with
    n_probs and ids, not the OpenAI fallback); against itself it is the noise floor; its KV
    memory is unknown (it was not started by ttft) and the report says so."""
    url = embedded_server.base_url
    assert engine_kind(Target(url)) == "llama-server"
    options = QualityOptions(lengths=(128,), samples=1, n_tokens=4)
    report, probes = run_quality(parse_side(url), parse_side(url), options)
    (row,) = report.lengths
    assert probes[0].prompt_tokens <= 128
    assert row.mean_kl == 0.0 and row.identical_share == 1.0 and row.verdict == "pass"
    assert report.kv_mib_baseline is None and "KV memory unknown" in report.trade()
    assert any(f"KV memory of {url} unknown" in n for n in report.notes)
