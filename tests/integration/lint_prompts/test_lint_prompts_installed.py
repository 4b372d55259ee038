"""``ttft lint prompts`` as the installed command (a subprocess): errors without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"
LOG = DATA / "requests" / "timestamp_first.jsonl"


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
