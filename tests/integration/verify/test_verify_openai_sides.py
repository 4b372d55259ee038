"""`verify quality` against OpenAI-style sides (what vLLM and SGLang answer), played by the
scripted server with ``top_logprobs``: the requests carry the OpenAI fields (not llama-server's),
the answers' logprobs become a KL by token text, the request log gets its own row, and a side
that returns no logprobs gets the other checks and a note naming what was skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script
from ttft.verify import QualityOptions, parse_side, run_quality
from ttft.verify.metrics import topk_kl

TOKENS = (" 4", "8", "2", "1")
SURE = ((" 4", -0.05), (" 5", -3.0))
UNSURE = ((" 4", -0.2), (" 5", -2.0))
REST = tuple(((t, -0.01), ("x", -5.0)) for t in TOKENS[1:])


@contextmanager
def server(script: Script, seen: list[tuple[str, dict[str, Any]]]) -> Iterator[ScriptedServer]:
    def pick(path: str, body: dict[str, Any]) -> Script:
        seen.append((path, body))
        return script

    with ScriptedServer(pick).in_thread() as running:
        yield running


def _log(tmp_path: Path) -> Path:
    log = tmp_path / "requests.jsonl"
    bodies = [{"messages": [{"role": "user", "content": f"question {i}"}]} for i in range(3)]
    log.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    return log


OPTIONS = QualityOptions(lengths=(64, 128), samples=1, n_tokens=4, n_probs=2)


def test_openai_logprobs_give_kl_by_text_and_a_row_for_the_users_prompts(tmp_path: Path) -> None:
    base_seen: list[tuple[str, dict[str, Any]]] = []
    cand_seen: list[tuple[str, dict[str, Any]]] = []
    base_script = Script(tokens=TOKENS, top_logprobs=(SURE, *REST), first_token_delay_ms=1)
    cand_script = Script(tokens=TOKENS, top_logprobs=(UNSURE, *REST), first_token_delay_ms=1)
    options = QualityOptions(**{**OPTIONS.__dict__, "requests_log": _log(tmp_path)})
    with server(base_script, base_seen) as base, server(cand_script, cand_seen) as cand:
        report, probes = run_quality(parse_side(base.base_url), parse_side(cand.base_url), options)

    chats = [b for p, b in base_seen if p == "/v1/chat/completions"]
    completions = [b for p, b in base_seen if p == "/v1/completions"]
    assert len(chats) == 3 and len(completions) == 1 + len(probes)  # a warm-up first
    for body in chats:
        assert body["logprobs"] is True and body["top_logprobs"] == 2
    for body in completions[1:]:
        assert body["logprobs"] == 2 and body["temperature"] == 0.0
    # llama-server's own fields are not sent to an engine that is not llama-server
    assert not any("n_probs" in b or "cache_prompt" in b for _, b in base_seen + cand_seen)

    # only the first position differs: per probe the mean over 4 positions is KL(first) / 4
    expected = topk_kl(dict(SURE), dict(UNSURE)) / 4
    assert expected > 0.01
    for row in report.rows:
        assert row.mean_kl is not None and math.isclose(row.mean_kl, expected, rel_tol=1e-9)
        assert row.top1 == 1.0 and row.identical_share == 1.0
    mine = report.prompts
    assert mine is not None and mine.samples == 3 and mine.recall_baseline is None
    assert mine.verdict == "degraded"  # mean KL 0.023: between pass (0.01) and fail (0.05)
    assert "your prompts degraded (3 checked)" in report.trade()
    assert "KV memory unknown" in report.trade()
    assert any("offers no tokenizer endpoint" in n for n in report.notes)
    assert sum("KV memory of http" in n for n in report.notes) == 2


def test_a_side_without_logprobs_gets_the_other_checks_and_a_note(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    with_probs = Script(tokens=TOKENS, top_logprobs=(SURE, *REST), first_token_delay_ms=1)
    without = Script(tokens=(" 4", "8", "2", "2"), first_token_delay_ms=1)
    options = QualityOptions(**{**OPTIONS.__dict__, "requests_log": _log(tmp_path)})
    with server(with_probs, seen) as base, server(without, seen) as cand:
        report, _ = run_quality(parse_side(base.base_url), parse_side(cand.base_url), options)
    assert any("skipped KL divergence and top-1 agreement" in n for n in report.notes)
    for row in report.rows:
        assert row.mean_kl is None and row.top1 is None
        # compared by characters: " 4821" and " 4822" first differ at the fifth character
        assert row.identical_share == 0.0 and row.first_divergence_mean == 4.0
        assert row.verdict == "fail"  # no continuation identical: below the 20% fail line


def test_the_cli_sends_the_api_key_and_headers_with_every_request_to_both_sides() -> None:
    """`verify quality` takes --api-key and --header like bench and doctor: a service behind a
    key can be checked, and every request to either side carries both."""
    from click.testing import CliRunner

    from ttft.cli.main import cli

    script = Script(tokens=TOKENS, top_logprobs=(SURE, *REST), first_token_delay_ms=1)
    with server(script, []) as base, server(script, []) as cand:
        args = ["verify", "quality", "--baseline", base.base_url, "--candidate", cand.base_url]
        args += ["--lengths", "64", "--samples", "1", "--tokens", "4", "--top-k", "2"]
        args += ["--api-key", "sekret", "--header", "X-Team: infra", "--format", "json"]
        result = CliRunner().invoke(cli, args)
        logs = [*base.logs, *cand.logs]
    assert result.exit_code == 0, result.output
    assert {log.path for log in logs} == {"/v1/completions"} and len(logs) >= 4
    for log in logs:
        assert log.headers.get("authorization") == "Bearer sekret"
        assert log.headers.get("x-team") == "infra"
