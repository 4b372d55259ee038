"""The article's misconfigured service, built from real parts, for the fix loop to find and fix.

- the embedded llama-server with one slot (``-np 1``): concurrent users queue behind each other;
- a real nginx from a site file as people keep them (``sites-enabled/``), with the classic
  stream faults: default ``proxy_buffering``, ``proxy_ignore_headers X-Accel-Buffering`` (so the
  engine's opt-out is discarded) and gzip on ``text/event-stream``;
- a request log whose system prompt (a few hundred tokens) starts with a timestamp line, so no
  request reuses another's prefix from the cache.

Nothing here is a stand-in: the engine, the model, the proxy and the requests are what a user
would run. ``seed_service`` yields where it all is; everything stops when the block ends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.engines.argv_edit import remove_flags
from ttft.engines.llamacpp.embedded import launch_embedded
from ttft.proxy.nginx import serve_config
from ttft.workload.text_source import sentence_text

SITE_TEMPLATE = """\
# A site file as it sits in /etc/nginx/sites-enabled/: an OpenAI-compatible API behind nginx.
upstream llm_backend {{
    server 127.0.0.1:{engine_port};
}}

server {{
    listen 8080;
    server_name _;

    gzip on;
    gzip_types text/plain application/json text/event-stream;

    location / {{
        proxy_pass http://llm_backend;
        proxy_http_version 1.1;
        proxy_set_header Host $host;
        proxy_ignore_headers X-Accel-Buffering;
        proxy_read_timeout 600s;
    }}
}}
"""

_START = dt.datetime(2026, 3, 15, 14, 22, 0, tzinfo=dt.UTC)


def request_log(count: int, system_words: int, seed: str = "seed-story") -> list[dict[str, Any]]:
    """Chat requests of several users: one support system prompt led by the current time."""
    policy = sentence_text(f"{seed}/system", system_words)
    lines = []
    for i in range(count):
        stamp = _START + dt.timedelta(seconds=41 * i + 7)
        system = (
            f"Current date and time: {stamp:%Y-%m-%d %H:%M:%S}.\n"
            "You are the support assistant of Northwind Outfitters. " + policy
        )
        user = "Question: " + sentence_text(f"{seed}/user/{i}", 14)
        lines.append(
            {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        )
    return lines


@dataclass(frozen=True)
class SeedService:
    url: str  # through nginx, as clients reach it
    direct_url: str  # the engine itself
    launch: str  # the engine's command line (without host and port)
    nginx_conf: Path
    requests_log: Path
    notes: tuple[str, ...]


@contextlib.contextmanager
def seed_service(
    folder: Path,
    *,
    requests: int = 24,
    system_words: int = 330,
    ctx_size: int = 4096,
    threads: int | None = None,
) -> Iterator[SeedService]:
    """Start the misconfigured service; its files (site file, request log) go to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "requests.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in request_log(requests, system_words)))
    with launch_embedded(ctx_size=ctx_size, parallel=1, threads=threads) as engine:
        site = folder / "llm-api.conf"
        site.write_text(SITE_TEMPLATE.format(engine_port=engine.config.port))
        launch = shlex.join(remove_flags(engine.process.argv, ["--host", "--port"], "llamacpp"))
        with serve_config(site) as proxy:
            yield SeedService(proxy.url, engine.base_url, launch, site, log, proxy.notes)
