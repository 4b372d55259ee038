"""A service built unlike the seed story's, for the fix loop to find and fix: a support bot.

- the embedded llama-server with one slot (``-np 1``), used by 3 users at once;
- a real nginx whose site file keeps proxy buffering on and discards the engine's
  ``X-Accel-Buffering: no``, and takes gzip on ``text/event-stream`` from an included snippet;
- a request log whose system prompt has one static line, then
  ``Customer u-12345 | session opened 2026-11-18 03:36`` on its second line, then about 1,050
  tokens of rules that are the same for every request: the dynamic content is not on the first
  line, and is an id no list of formats knows.

Nothing here is a stand-in: the engine, the model, the proxy and the requests are real.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ttft.engines.argv_edit import remove_flags
from ttft.engines.llamacpp.embedded import launch_embedded
from ttft.proxy.nginx import serve_config
from ttft.testing.seed_service import SeedService
from ttft.workload.text_source import sentence_text

SITE_TEMPLATE = """\
# sites-enabled/support-bot.conf
upstream support_llm {{
    server 127.0.0.1:{engine_port};
}}

server {{
    listen 8080;
    server_name _;
    include {snippet};

    location /v1/ {{
        proxy_pass http://support_llm;
        proxy_http_version 1.1;
        proxy_buffering on;
        proxy_buffers 16 16k;
        proxy_ignore_headers X-Accel-Buffering;
        proxy_read_timeout 600s;
    }}
}}
"""

SNIPPET = """\
# snippets/compression.conf: shared by every site
gzip on;
gzip_min_length 64;
gzip_types text/plain text/css application/json text/event-stream;
"""

USERS = ("u-12345", "u-48213", "u-90577")
_OPENED = dt.datetime(2026, 11, 18, 3, 36, tzinfo=dt.UTC)


def request_log(count: int, rules_words: int, seed: str = "support-bot") -> list[dict[str, Any]]:
    """Chat requests of 3 users taking turns: a customer line second, then the same rules."""
    rules = sentence_text(f"{seed}/rules", rules_words)
    bodies = []
    for i in range(count):
        user = USERS[i % len(USERS)]
        opened = _OPENED + dt.timedelta(minutes=11 * (i // len(USERS)), seconds=17 * i)
        system = (
            "You are the support assistant of Northwind Outfitters; answer briefly.\n"
            f"Customer {user} | session opened {opened:%Y-%m-%d %H:%M}\n" + rules
        )
        question = "Question: " + sentence_text(f"{seed}/question/{i}", 14)
        bodies.append(
            {
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": question},
                ]
            }
        )
    return bodies


@contextlib.contextmanager
def support_bot(
    folder: Path,
    *,
    requests: int = 24,
    rules_words: int = 800,
    ctx_size: int = 4096,
    threads: int | None = None,
) -> Iterator[SeedService]:
    """Start the support bot; its files (site file, snippet, request log) go to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "requests.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in request_log(requests, rules_words)))
    snippet = folder / "snippets" / "compression.conf"
    snippet.parent.mkdir(exist_ok=True)
    snippet.write_text(SNIPPET)
    with launch_embedded(ctx_size=ctx_size, parallel=1, threads=threads) as engine:
        site = folder / "support-bot.conf"
        site.write_text(SITE_TEMPLATE.format(engine_port=engine.config.port, snippet=snippet))
        launch = shlex.join(remove_flags(engine.process.argv, ["--host", "--port"], "llamacpp"))
        with serve_config(site) as proxy:
            yield SeedService(proxy.url, engine.base_url, launch, site, log, proxy.notes)
