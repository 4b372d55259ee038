"""The calibration's reader of an engine's prefix-cache hit counter, against a metrics endpoint
on loopback."""

from __future__ import annotations

import http.server
import threading

from ttft.core.target import Target
from ttft.simulate.calibrate import hit_counter


def test_the_hit_counter_reads_the_engines_prefix_cache_metric() -> None:
    """The counter a calibration reads around a cached request: vLLM's V1 name, or the older
    spelling; a read that fails, or an engine of unknown kind, gives None (the hit is then left
    out, not guessed)."""
    bodies = iter(["vllm:prefix_cache_hits_total 256\n", "vllm:gpu_prefix_cache_hits_total 768\n"])

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = next(bodies, "other_metric 1\n").encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        read = hit_counter(Target(url, "m", url + "/metrics", "vllm"))
        assert read is not None
        assert (read(), read(), read()) == (256.0, 768.0, None)
    finally:
        server.shutdown()
    unreachable = hit_counter(Target("http://127.0.0.1:9", "m", None, "vllm"))
    assert unreachable is not None and unreachable() is None
    assert hit_counter(Target("http://127.0.0.1:9", "m", None, None)) is None
