"""``ttft tune frontend`` on the example request log against the real embedded llama-server.

The template is the one the server reports in GET /props (llama.cpp's ChatML fallback: the
embedded GGUF carries none), both tokenizers come from the embedded GGUF, and the server's own
/tokenize is timed too. Only relations that must hold are asserted, never absolute times: a
cache hit (hash, lookup, string join) is cheaper than a Jinja render, the Rust merge loop is
cheaper than the Python one on the long request, and every tokenizer either gives the Rust ids
or is listed as a mismatch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli

pytestmark = pytest.mark.e2e

LOG = Path(__file__).parents[2] / "examples" / "requests.jsonl"


def test_frontend_on_the_example_log_against_the_embedded_engine() -> None:
    args = ["tune", "frontend", "--request-log", str(LOG), "--repeats", "7", "--format", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "ttft.tune.frontend/1"
    assert doc["sources"]["template"].endswith("/props (chat_template)")
    assert set(doc["stages"]) == {
        "render_full", "render_prerendered", "tokenize_python", "tokenize_rust", "tokenize_server",
    }  # fmt: skip
    lines = [line for line in LOG.read_text().splitlines() if line.strip()]
    assert len(doc["requests"]) == len(lines)
    assert all(r["prerenderable"] for r in doc["requests"])
    assert all(r["tokens"] > 0 and r["stages"]["render_full"]["runs"] == 7 for r in doc["requests"])

    savings = {(s["anchor"], s["alternative"]): s for s in doc["savings"]}
    # Summed over the log: the hit path is a hash and a join, the full path a Jinja render.
    assert savings[("render_full", "render_prerendered")]["ratio"] < 1.0
    longest = max(doc["requests"], key=lambda r: r["tokens"])
    stages = longest["stages"]
    assert stages["tokenize_rust"]["p50_ms"] < stages["tokenize_python"]["p50_ms"]

    # Every request either agrees with the Rust ids or is reported, with the first difference.
    for m in doc["mismatches"]:
        assert m["tokenizer"] in ("python", "server") and m["first_difference"] >= 0
    mismatched = {m["tokenizer"] for m in doc["mismatches"]}
    for name in mismatched:
        assert any(f"The {name} tokenizer's ids differ" in w for w in doc["warnings"])
    # On this log no request puts the same static part twice: the date in the system prompt.
    assert doc["cache"]["static_parts"] == len(lines)
    assert doc["cache"]["static_parts_moved"] < len(lines)
