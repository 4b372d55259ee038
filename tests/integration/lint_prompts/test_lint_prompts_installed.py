"""``ttft lint prompts`` as the installed command (a subprocess): errors without a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data"
LOG = DATA / "requests" / "timestamp_first.jsonl"


@pytest.fixture
def model_dir(tmp_path: Path, build_tokenizer_json: Callable[[Path, list[str]], Path]) -> Path:
    """A model folder as on the Hub: tokenizer_config.json (ChatML template) and tokenizer.json."""
    corpus = [json.dumps(json.loads(line)) for line in LOG.read_text().splitlines()]
    build_tokenizer_json(tmp_path / "tokenizer.json", corpus)
    config = {
        "chat_template": (DATA / "templates" / "llama_server_chatml.jinja").read_text(),
        "bos_token": "<bos>",
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path


def test_the_installed_command_prints_the_error_without_a_traceback(
    model_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"messages": [{"role": "user", "content": "a"}]}\n{"messages": 3}\n')
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ttft.cli.main import main; main()",
            "lint",
            "prompts",
            str(log),
            "--template",
            str(model_dir / "tokenizer_config.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"{log}:2: no 'messages' list" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
