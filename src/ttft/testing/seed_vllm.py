"""The article's misconfigured service on a real vLLM, for the fix loop to find and fix.

Like ``seed_service`` (same nginx site file: default buffering, the engine's opt-out header
ignored, gzip on ``text/event-stream``; same timestamp-first request log), with vLLM's CPU build
serving the small local model with prefix caching off and one running sequence
(``--no-enable-prefix-caching --max-num-seqs 1``). The request log asks for the answer length the
plan measures with, so doctor's capacity probe holds the sequence as long as real users do.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Iterator
from pathlib import Path

from ttft.engines.argv_edit import remove_flags
from ttft.engines.vllm.local import VllmConfig, launch_vllm
from ttft.proxy.nginx import serve_config
from ttft.testing.seed_service import SITE_TEMPLATE, SeedService, request_log


@contextlib.contextmanager
def seed_vllm_service(
    folder: Path, *, requests: int = 16, system_words: int = 330, max_tokens: int = 64
) -> Iterator[SeedService]:
    """Start the misconfigured vLLM service; its files go to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "requests.jsonl"
    bodies = [{**body, "max_tokens": max_tokens} for body in request_log(requests, system_words)]
    log.write_text("".join(json.dumps(x) + "\n" for x in bodies))
    config = VllmConfig(prefix_caching=False, max_num_seqs=1)
    with launch_vllm(config, log_path=folder / "vllm.log") as engine:
        site = folder / "llm-api.conf"
        site.write_text(SITE_TEMPLATE.format(engine_port=engine.config.port))
        launch = shlex.join(remove_flags(engine.argv, ["--host", "--port"], "vllm"))
        with serve_config(site) as proxy:
            yield SeedService(proxy.url, engine.base_url, launch, site, log, proxy.notes)
