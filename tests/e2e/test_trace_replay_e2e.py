"""Trace replay, first-token rungs and request ids on the real embedded llama-server.

The Mooncake acceptance: a trace whose requests share hash ids shows, on the real engine, the
cached prompt tokens the trace implies. llama-server's cache is per slot, so the engine has one
slot and every reuse in this trace is from the request just before (then any cache policy that
keeps at least the last prompt gives the implied amount, and no policy can give more). Gemma 3
uses sliding-window attention: without ``--swa-full`` llama-server restores a prefix only from a
checkpoint near the end of the previous prompt, so the engine runs with it (as bench does for
a Mooncake replay on the embedded engine).

Tolerance, per request: llama-server counts the BOS token it prepends as cached whenever the
previous prompt had one too (+1), and a block that differs from the previous request's block
may still start with the same word by chance (+1 more, rarely).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ttft.core.records import RunAnchor
from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded
from ttft.load.bench import run_cells
from ttft.load.runner import CellPlan
from ttft.load.sink import JsonlSink, read_results
from ttft.workload.arrival import ClosedLoop
from ttft.workload.mooncake import Block, BlockTexts, implied_cached_tokens
from ttft.workload.requests import WorkItem, chat_body
from ttft.workload.trace import read_trace

pytestmark = pytest.mark.e2e

BLOCK = 64
# (arrival ms, hash ids); a request whose index is a multiple of 3 ends in a partial block.
TRACE = [
    (0, [1, 2, 3]),
    (300, [1, 2, 4]),
    (600, [1, 2, 4, 5]),
    (900, [6, 7]),
    (1200, [6, 7, 8]),
    (1500, [6, 9]),
    (1800, [6, 9, 10, 11]),
    (2100, [12]),
    (2400, [12, 13, 14]),
    (2700, [12, 13, 14, 15]),
]


def write_trace(path: Path) -> Path:
    with path.open("w") as f:
        for i, (t, ids) in enumerate(TRACE):
            length = BLOCK * len(ids) - (20 if i % 3 == 0 else 0)
            line = {"timestamp": t, "input_length": length, "output_length": 16, "hash_ids": ids}
            f.write(json.dumps(line) + "\n")
    return path


def test_a_mooncake_replay_shows_the_cached_prompt_tokens_the_trace_implies(
    tmp_path: Path, engine_threads: int
) -> None:
    trace_path = write_trace(tmp_path / "mooncake.jsonl")
    implied = implied_cached_tokens(read_trace(trace_path, block_size=BLOCK).requests, BLOCK)
    assert sum(implied) == 832 and implied.count(0) == 3  # the trace does reuse, and not always
    out = tmp_path / "out"
    engine = launch_embedded(ctx_size=2048, parallel=1, threads=engine_threads,
                             extra_args=("--swa-full",))  # fmt: skip
    with engine:
        done = subprocess.run(
            [sys.executable, "-m", "ttft", "bench", "--url", engine.base_url, "--trace",
             str(trace_path), "--block-size", str(BLOCK), "--api", "completions",
             "--max-tokens", "1", "--out", str(out)],
            capture_output=True, text=True, timeout=300, env={**os.environ},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    records = [r for r in read_results(out / "records.jsonl").records if r.phase == "warm"]
    assert len(records) == len(TRACE) and all(r.ok for r in records)
    records.sort(key=lambda r: r.index)
    for record, (_, ids), want in zip(records, TRACE, implied, strict=True):
        assert record.completion_tokens == 1  # --max-tokens caps the trace's 16
        length = BLOCK * len(ids) - (20 if records.index(record) % 3 == 0 else 0)
        assert record.prompt_tokens == length + 1  # exact prompts, plus llama-server's BOS
        cached = record.cached_tokens
        assert cached is not None and 0 <= cached - want <= 2, (record.index, cached, want)
    measured = sum(r.cached_tokens or 0 for r in records)
    assert sum(implied) <= measured <= sum(implied) + 2 * len(records)
    summary = json.loads((out / "summary.json").read_text())
    reuse = summary["meta"]["trace_reuse"]
    assert reuse["implied_cached_tokens"] == 832 and reuse["measured_cached_tokens"] == measured
    assert "prefix reuse: the trace implies 832 cached prompt tokens" in done.stderr
    (cell,) = summary["cells"]
    assert cell["cell"] == "mooncake replay"
    # The schedule is the trace's: scheduled offsets 300 ms apart, exactly.
    starts = [r.scheduled_ns or 0 for r in records]
    assert [s - starts[0] for s in starts] == [t * 1_000_000 for t, _ in TRACE]


def test_chat_rungs_and_request_ids_on_the_real_engine(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    """llama-server's role-only chunk comes with the first token; every request has its id;
    the server does not echo X-Request-Id, so nothing can mismatch; the stream names itself."""
    target = Target(embedded_server.base_url, embedded_server.model_name, None, "llamacpp")
    items = [
        WorkItem(chat_body([{"role": "user", "content": f"Count to five, take {i}."}], 4))
        for i in range(3)
    ]
    with JsonlSink(tmp_path / "records.jsonl") as sink:
        result = asyncio.run(
            run_cells(
                target, [CellPlan("chat", items, ClosedLoop(1))], sink, anchor=RunAnchor.now()
            )
        )
    records = result.cells[0].records
    assert all(r.ok for r in records)
    ids = [r.request_id or "" for r in records]
    assert len(set(ids)) == 3
    assert all(i.endswith(f"-{r.index}") for i, r in zip(ids, records, strict=True))
    for r in records:
        assert r.first_role_ns is not None and r.first_content_ns is not None
        assert r.first_event_ns is not None and r.first_event_ns <= r.first_role_ns
        assert r.first_role_ns <= r.first_content_ns
        assert len(r.chunk_ns) >= 2 and r.chunk_ns[1] > r.chunk_ns[0]  # a second token
        assert r.server_request_id is None and not r.request_id_mismatch
        assert r.response_id is not None and r.response_id.startswith("chatcmpl")
        assert r.first_reasoning_ns is None and r.first_tool_call_ns is None  # a base model


def test_blocks_join_without_moving_token_boundaries_in_the_real_tokenizer(
    embedded_server: RunningEngine,
) -> None:
    """Gemma's tokenizer through /tokenize: a block tokenizes the same alone and after another
    block, so a shared block is the same token ids wherever it appears."""
    tokenizer = ServerTokenizer(
        Target(embedded_server.base_url, embedded_server.model_name, None, "llamacpp")
    )
    texts = BlockTexts(tokenizer, "e2e")
    blocks = [texts.text(Block(h, n)) for h, n in ((1, 64), (2, 64), (3, 17), (4, 64), (5, 1))]
    alone = [tokenizer.encode(text) for text in blocks]
    assert [len(ids) for ids in alone] == [64, 64, 17, 64, 1]
    for i in range(1, len(blocks)):
        joined = tokenizer.encode("".join(blocks[: i + 1]))
        assert joined == [t for ids in alone[: i + 1] for t in ids]
