"""``ttft lint nginx`` and ``ttft lint engine`` through the CLI: exit codes, formats, and clean
messages (never a traceback) for unusable input, under click's runner and under ``main()``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from nginx_testkit import NGINX_DATA

from ttft.cli.main import cli, main

ENGINE_DATA = Path(__file__).resolve().parents[2] / "data" / "engine"
BAD = str(NGINX_DATA / "bad" / "nginx.conf")
CLEAN = str(NGINX_DATA / "clean" / "nginx.conf")
ARTICLE_VLLM = [
    "vllm",
    "serve",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--gpu-memory-utilization",
    "0.88",
    "--enable-prefix-caching",
    "--enable-chunked-prefill",
    "--max-num-batched-tokens",
    "2048",
    "--max-num-seqs",
    "64",
]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def run_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """The installed entry point's behaviour: ``main()`` with argv, exit code from SystemExit."""
    monkeypatch.setattr(sys, "argv", ["ttft", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# --- nginx ------------------------------------------------------------------------------------


def test_lint_is_listed_in_ttft_help() -> None:
    code, out, _ = run("--help")
    assert code == 0 and "lint" in out and "Static checks that catch TTFT killers" in out


def test_bad_config_exits_1_and_clean_config_exits_0() -> None:
    code, out, _ = run("lint", "nginx", BAD)
    assert code == 1 and "nginx/gzip-event-stream" in out and "conf.d/llm.conf" in out
    code, out, _ = run("lint", "nginx", CLEAN)
    assert code == 0 and "no findings" in out


def test_fail_on_error_ignores_warnings_and_never_always_passes() -> None:
    inheritance = str(NGINX_DATA / "inheritance" / "nginx.conf")  # warnings and infos only
    assert run("lint", "nginx", inheritance)[0] == 1
    assert run("lint", "nginx", inheritance, "--fail-on", "error")[0] == 0
    assert run("lint", "nginx", BAD, "--fail-on", "never")[0] == 0


def test_ignore_removes_rules_before_the_exit_code() -> None:
    code, out, _ = run("lint", "nginx", BAD, "--ignore", "nginx/*", "--format", "json")
    assert code == 0 and json.loads(out)["findings"] == []


def test_json_output_is_the_versioned_document() -> None:
    code, out, _ = run("lint", "nginx", BAD, "--format", "json", "--upstream-engine", "vllm")
    doc = json.loads(out)
    assert code == 1 and doc["schema"] == "ttft.lint/1"
    assert doc["subject"] == f"nginx {BAD}"
    assert all("line" in f["location"] for f in doc["findings"])


def test_sarif_output_lists_rules_and_regions() -> None:
    code, out, _ = run("lint", "nginx", BAD, "--format", "sarif")
    run_ = json.loads(out)["runs"][0]
    assert code == 1
    assert {r["id"] for r in run_["tool"]["driver"]["rules"]} >= {"nginx/proxy-cache"}
    assert all(
        "startLine" in r["locations"][0]["physicalLocation"]["region"] for r in run_["results"]
    )


def test_location_filter_and_upstream_engine_options() -> None:
    _code, out, _ = run(
        "lint",
        "nginx",
        BAD,
        "--location",
        "/health",
        "--upstream-engine",
        "llamacpp",
        "--format",
        "json",
    )
    findings = json.loads(out)["findings"]
    assert findings and all("/v1/" not in f["message"] for f in findings)
    buffering = [f for f in findings if f["rule"] == "nginx/proxy-buffering"]
    assert buffering and buffering[0]["severity"] == "info"  # llama-server's header rescues it


@pytest.mark.parametrize(
    ("name", "line", "rule", "text"),
    [
        ("broken", 11, "nginx/config-error", 'expecting "}"'),
        ("missing-include", 4, "nginx/include-missing", "included file not found"),
    ],
)
def test_malformed_config_names_file_and_line(name: str, line: int, rule: str, text: str) -> None:
    path = str(NGINX_DATA / name / "nginx.conf")
    code, out, _ = run("lint", "nginx", path, "--format", "json")
    errors = [f for f in json.loads(out)["findings"] if f["rule"] == rule]
    assert code == 1 and errors[0]["location"] == {"file": path, "line": line}
    assert text in errors[0]["message"]
    code, out, _ = run("lint", "nginx", path)
    assert f"{line}" in out and rule in out


def test_missing_file_is_exit_2_with_a_message(tmp_path: Path) -> None:
    code, out, err = run("lint", "nginx", str(tmp_path / "nope.conf"))
    assert code == 2 and "nope.conf: no such file" in err and out == ""


def test_bad_min_read_timeout_is_exit_2() -> None:
    code, _, err = run("lint", "nginx", CLEAN, "--min-read-timeout", "soon")
    assert code == 2 and "not an nginx time" in err


def test_main_reports_broken_config_and_missing_file_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_main(
        monkeypatch, capsys, "lint", "nginx", str(NGINX_DATA / "broken" / "nginx.conf")
    )
    assert code == 1 and "nginx/config-error" in out
    code, _, err = run_main(monkeypatch, capsys, "lint", "nginx", str(tmp_path / "x.conf"))
    assert code == 2 and "x.conf: no such file" in err
    code, out, _ = run_main(monkeypatch, capsys, "lint", "nginx", CLEAN)
    assert code == 0 and "no findings" in out


def test_installed_command_exit_codes() -> None:
    """The real ``ttft`` console script, as CI would call it."""
    ttft = [sys.executable, "-c", "from ttft.cli.main import main; main()"]
    bad = subprocess.run([*ttft, "lint", "nginx", BAD], capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    gone = subprocess.run(
        [*ttft, "lint", "nginx", "/nonexistent/nginx.conf"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert gone.returncode == 2 and "no such file" in gone.stderr and "Traceback" not in gone.stderr


# --- engine -----------------------------------------------------------------------------------


def test_engine_clean_command_exits_0() -> None:
    code, out, _ = run("lint", "engine", "--", *ARTICLE_VLLM)
    assert code == 0 and "no findings" in out and "vLLM command line" in out


def test_engine_findings_exit_1_and_point_at_tokens() -> None:
    code, out, _ = run("lint", "engine", "--format", "json", "--", *ARTICLE_VLLM, "--enforce-eager")
    doc = json.loads(out)
    assert code == 1
    graphs = next(f for f in doc["findings"] if f["rule"] == "vllm/cuda-graphs")
    assert graphs["location"] == {"file": "<command line>", "offset": 11, "offset_unit": "token"}


def test_engine_expected_concurrency_and_cpu_options() -> None:
    code, out, _ = run(
        "lint",
        "engine",
        "--expected-concurrency",
        "8",
        "--cpu",
        "--format",
        "json",
        "--",
        "llama-server",
        "-m",
        "m.gguf",
        "-np",
        "2",
    )
    rules = {f["rule"]: f["severity"] for f in json.loads(out)["findings"]}
    assert rules["llamacpp/concurrency-cap"] == "warning"
    assert rules["llamacpp/gpu-layers"] == "info"  # moot on CPU, and said so
    assert code == 1


def test_engine_command_as_one_quoted_string() -> None:
    code, out, _ = run("lint", "engine", "--format", "json", "--", "vllm serve m --enforce-eager")
    assert code == 1 and "vllm/cuda-graphs" in out


def test_engine_from_file_reports_lines_in_sarif() -> None:
    script = str(ENGINE_DATA / "start-vllm.sh")
    code, out, _ = run("lint", "engine", "--from-file", script, "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    eager = next(r for r in results if r["ruleId"] == "vllm/cuda-graphs")
    physical = eager["locations"][0]["physicalLocation"]
    assert physical["region"] == {"startLine": 15}
    assert physical["artifactLocation"]["uri"].endswith("start-vllm.sh")
    assert code == 1


def test_engine_unknown_flags_are_info_not_a_crash() -> None:
    code, out, _ = run("lint", "engine", "--", *ARTICLE_VLLM, "--from-the-future", "on")
    assert code == 0 and "engine/unknown-flag" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "no command line given"),
        (("--", "text-generation-launcher", "--model-id", "x"), "cannot tell which engine"),
        (("--", "vllm serve 'unbalanced"), "check the quotes"),
        (("--from-file", "/nonexistent/start.sh"), "no such file"),
    ],
)
def test_engine_unusable_input_is_exit_2(args: tuple[str, ...], message: str) -> None:
    code, _, err = run("lint", "engine", *args)
    assert code == 2 and message in err


def test_engine_under_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(
        monkeypatch, capsys, "lint", "engine", "--", *ARTICLE_VLLM, "--enforce-eager"
    )
    assert code == 1 and "vllm/cuda-graphs" in out
    code, _, err = run_main(monkeypatch, capsys, "lint", "engine", "--", "mystery-server")
    assert code == 2 and "cannot tell which engine" in err


def test_missing_crossplane_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the optional parser installed, the message says which extra to install."""
    monkeypatch.setitem(sys.modules, "crossplane", None)
    code, _, err = run("lint", "nginx", CLEAN)
    assert code == 2 and "pip install 'ttft[lint]'" in err
