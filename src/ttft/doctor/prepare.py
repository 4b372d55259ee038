"""Before the first step: the target doctor measures and the context its steps share.

The decisions live here, not in the CLI:

- the target: the user's service, or the embedded llama-server started with room per slot for
  the longest logged request; its very first request is kept for the cold-start step, and its
  launch command for the plan (which runs its own copy on a port of its own);
- proxy or direct: with ``--direct-url`` (the engine behind a proxy) and no metrics URL of the
  user's, metrics are read from the engine itself (a proxy often passes only ``/v1/``); the
  control endpoints (``/props``, ``/tokenize``) through the proxy when it passes them, else from
  the engine;
- the engine kind: given, else detected from the metrics;
- the load levels: the user's, else (1, 4) for the embedded engine and (1, 8, 32) otherwise;
- the GPU source: local (``nvidia-smi``) only for an engine on this machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.slo import Slo
from ttft.core.target import Target
from ttft.core.target_options import TargetOptions
from ttft.doctor.context import DoctorContext, server_tokenizer
from ttft.engines.argv_edit import remove_flags
from ttft.engines.control import ControlClient
from ttft.engines.llamacpp.on_demand import EmbeddedSize, context_for, target_or_embedded
from ttft.load.gpu_sampler import find_gpu_source
from ttft.probe.sampler import sample
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.requests import WorkItem, chat_body
from ttft.workload.tokenizer import Tokenizer

EMBEDDED_LEVELS = (1, 4)
DEFAULT_LEVELS = (1, 8, 32)


@dataclass(frozen=True)
class DoctorAsk:
    """What the user asked of doctor, parsed: the CLI's options without their wording."""

    service: TargetOptions  # no url: the embedded engine
    deadline: float  # time.monotonic() by which the whole run must end
    direct_url: str | None = None  # the engine behind a proxy, when the service is the proxy
    levels: tuple[int, ...] | None = None  # None: by the kind of target
    real_items: list[WorkItem] = field(default_factory=list)  # the log's, with max_tokens 1
    asked_answer_tokens: tuple[int, ...] = ()
    slos: tuple[Slo, ...] = ()
    gpu_metrics_url: str | None = None
    force_hol: bool = False


@dataclass(frozen=True)
class DoctorTarget:
    """What doctor measures: the target, and for an engine doctor started itself, its first
    (cold) request and its launch command (both None for a service it was pointed at)."""

    target: Target
    cold: RequestRecord | None = None
    launch: str | None = None

    @property
    def managed(self) -> bool:
        return self.launch is not None


def embedded_size(real: list[WorkItem]) -> EmbeddedSize:
    """Room per slot for the longest logged request (about 3 characters of JSON a token),
    and never less than the doctor's own probes need."""
    longest_chars = max((len(json.dumps(i.body)) for i in real), default=0)
    return EmbeddedSize(context_for(max(1536, longest_chars // 3 + 128)))


@contextlib.contextmanager
def doctor_target(
    ask: DoctorAsk, on_start: Callable[[EmbeddedSize], None] | None = None
) -> Iterator[DoctorTarget]:
    """The user's service, or the embedded engine (``on_start`` is told before it starts,
    and it is stopped on the way out)."""
    given = ask.service.target()
    with target_or_embedded(given, embedded_size(ask.real_items), on_start=on_start) as served:
        engine = served.engine
        if engine is None:
            yield DoctorTarget(served.target)
            return
        # The plan runs its own copy of this engine on a port of its own.
        launch = shlex.join(remove_flags(engine.process.argv, ["--port", "--host"], "llamacpp"))
        yield DoctorTarget(served.target, cold_request(served.target), launch)


def cold_request(target: Target) -> RequestRecord | None:
    """The very first request after start, kept for the cold-start step."""
    tokenizer = server_tokenizer(target)
    if tokenizer is None:
        return None
    body = chat_body(
        [{"role": "user", "content": text_of_tokens(tokenizer, 200, "doctor/cold")}], 1
    )
    records = sample(target, [WorkItem(body)], anchor=RunAnchor.now()).records
    return records[0] if records else None


def open_context(ask: DoctorAsk, served: DoctorTarget) -> DoctorContext:
    """The context of a doctor run on ``served``, every decision above taken."""
    target, direct = _through_proxy(ask, served.target)
    props, tokenizer = _control(target, direct)
    gpu, gpu_missing = find_gpu_source(
        ask.gpu_metrics_url, local=served.managed or _is_loopback(target.root)
    )
    ctx = DoctorContext(
        target=target,
        deadline=ask.deadline,
        direct=direct,
        managed=served.managed,
        cold_record=served.cold,
        levels=ask.levels or (EMBEDDED_LEVELS if served.managed else DEFAULT_LEVELS),
        real_items=ask.real_items,
        asked_answer_tokens=ask.asked_answer_tokens,
        slos=ask.slos,
        tokenizer=tokenizer,
        props=props,
        gpu=gpu,
        gpu_missing=gpu_missing,
        force_hol=ask.force_hol,
    )
    if ctx.engine_kind is None:
        ctx.target = _with_detected_kind(target)
    return ctx


def _through_proxy(ask: DoctorAsk, target: Target) -> tuple[Target, Target | None]:
    """The target (its metrics from the engine behind a proxy when the user named none) and
    the engine itself (None without ``--direct-url``)."""
    if not ask.direct_url:
        return target, None
    direct = Target(ask.direct_url, target.model, None, target.engine_kind, ask.service.api_key)
    if ask.service.metrics_url is None:
        # A proxy often passes only /v1/; the engine's own /metrics is the same data.
        target = dataclasses.replace(target, metrics_url=direct.root + "/metrics")
    return target, direct


def _control(target: Target, direct: Target | None) -> tuple[dict[str, Any], Tokenizer | None]:
    """The engine's control endpoints (/props, /tokenize), through the proxy when it passes
    them, else straight from the engine behind it."""
    props = ControlClient(target).props()
    tokenizer = server_tokenizer(target)
    if direct is not None:
        props = props or ControlClient(direct).props()
        tokenizer = tokenizer or server_tokenizer(direct)
    return props, tokenizer


def _with_detected_kind(target: Target) -> Target:
    """The target with the engine kind its metrics show (still None when they show none)."""
    from ttft.load.server_metrics import MetricsWatcher

    watcher = MetricsWatcher(target.metrics_url, headers=target.auth_headers())
    watcher.snapshot()
    # replace, not a new Target: the user's --header values (a tenant, a route) must survive
    return dataclasses.replace(target, engine_kind=watcher.engine_kind)


def _is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")
