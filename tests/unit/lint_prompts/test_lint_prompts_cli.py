"""``ttft lint prompts`` from the command line with files only (no server): output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ttft.cli.main import cli

DATA = Path(__file__).resolve().parents[2] / "data"
LOG = DATA / "requests" / "timestamp_first.jsonl"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["lint", "prompts", *args])


def test_text_output_has_the_finding_and_the_prefix_cache_table(model_dir: Path) -> None:
    result = run(
        str(LOG), "--template", str(model_dir / "tokenizer_config.json"), "--prefill-rate", "400"
    )
    assert result.exit_code == 1, result.output
    out = result.output
    assert "prompts/dynamic-prefix" in out and "1 error" in out
    assert "prefix-cache replay (token model" in out
    assert "prefix-cache hit rate (ideal)" in out and "after fixes" in out
    assert "ms less TTFT per request" in out


def test_json_output_carries_the_prefix_cache_report(model_dir: Path) -> None:
    result = run(
        str(LOG), "--template", str(model_dir / "tokenizer_config.json"), "--format", "json"
    )
    document = json.loads(result.output)
    cache = document["prefix_cache"]
    assert cache["requests"] == 12 and cache["cache_model"]["name"] == "token"
    assert cache["before"]["hit_rate"] < 0.1 < 0.7 < cache["after"]["hit_rate"]
    assert cache["prefill_tokens_per_s"] is None and cache["ttft_saved_ms_per_request"] is None
    assert document["findings"][0]["location"] == {"file": str(LOG), "line": 1}


def test_sarif_output_keeps_the_report_in_the_run_properties(model_dir: Path) -> None:
    result = run(
        str(LOG),
        "--template",
        str(model_dir / "tokenizer_config.json"),
        "--format",
        "sarif",
        "--cache-model",
        "vllm",
    )
    run0 = json.loads(result.output)["runs"][0]
    assert run0["results"][0]["ruleId"] == "prompts/dynamic-prefix"
    assert run0["properties"]["prefix_cache"]["cache_model"]["name"] == "vllm"


def test_fail_on_and_ignore_gate_the_exit_code(model_dir: Path) -> None:
    config = str(model_dir / "tokenizer_config.json")
    assert run(str(LOG), "--template", config, "--fail-on", "never").exit_code == 0
    ignored = run(str(LOG), "--template", config, "--ignore", "prompts/*", "--format", "json")
    assert ignored.exit_code == 0 and json.loads(ignored.output)["findings"] == []


def test_one_sample_conversation_is_located_by_token(model_dir: Path, tmp_path: Path) -> None:
    sample = tmp_path / "chat.json"
    sample.write_text(
        json.dumps(
            [
                {"role": "system", "content": "you are a helpful assistant\nsession=ab12cd34ef"},
                {"role": "user", "content": "hi"},
            ]
        )
    )
    result = run(
        "--messages",
        str(sample),
        "--template",
        str(model_dir / "tokenizer_config.json"),
        "--format",
        "json",
    )
    (finding,) = json.loads(result.output)["findings"]
    assert finding["location"]["file"] == str(sample)
    assert finding["location"]["offset_unit"] == "token"


@pytest.mark.parametrize(
    ("log_text", "template_text", "expected"),
    [
        (
            '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [\n',
            None,
            "log.jsonl:2: not valid JSON",
        ),
        (
            None,
            "{% for m in messages %}\n{{ m.content }\n{% endfor %}",
            "t.jinja: line 2: chat template syntax error",
        ),
        (
            None,
            "ok\n{{ raise_exception('no system role here') }}",
            "t.jinja: line 2: the chat template refused the conversation for",
        ),
    ],
)
def test_malformed_input_is_a_message_with_file_and_line_and_exit_2(
    model_dir: Path,
    tmp_path: Path,
    log_text: str | None,
    template_text: str | None,
    expected: str,
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(log_text or LOG.read_text())
    template = tmp_path / "t.jinja"
    template.write_text(template_text or "{{ messages[0].content }}")
    result = run(
        str(log), "--template", str(template), "--tokenizer", str(model_dir / "tokenizer.json")
    )
    assert result.exit_code == 2
    assert expected in result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def test_a_log_and_a_sample_together_is_a_usage_error(model_dir: Path) -> None:
    result = run(
        str(LOG), "--messages", str(LOG), "--template", str(model_dir / "tokenizer_config.json")
    )
    assert result.exit_code == 2 and "give a request log" in result.output
