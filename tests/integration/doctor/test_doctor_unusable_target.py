"""A target that answers every request with an error gets an 'incomplete' report and exit 1,
never a clean bill of health."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class _Broken(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.dumps({"error": {"message": "model overloaded"}}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def broken_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_every_request_failing_is_incomplete_with_the_servers_message(broken_url: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ttft.cli.main import main; main()",
            "doctor",
            "--url",
            broken_url,
            "--model",
            "m",
            "--concurrency",
            "1",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["healthy"] is False and report["findings"] == []
    assert "transport" in report["failed_steps"]
    notes = [n for s in report["steps"] for n in s["notes"]]
    assert any("model overloaded" in n for n in notes)
