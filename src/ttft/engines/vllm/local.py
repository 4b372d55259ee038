"""A real vLLM (CPU build) started on loopback, with the small local model by default.

``launch_vllm`` runs ``vllm serve`` from the environment ``ttft.engines.vllm.install`` made, waits
for ``/health`` and returns a ``RunningVllm``; stopping it stops the whole process group. The
defaults suit a CPU with two cores: float32 (bfloat16 is emulated, about 4x slower),
``--enforce-eager`` (skips torch.compile: start-up in tens of seconds instead of about two
minutes), ``--load-format dummy`` for the local model (random weights, no download).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ttft.core.errors import TtftError
from ttft.engines.adapter import EngineAdapter
from ttft.engines.process import ServerProcess, ensure_port_free, free_loopback_port
from ttft.engines.vllm.adapter import ADAPTER
from ttft.engines.vllm.help_check import flags_in_help, help_text, unknown_flags
from ttft.engines.vllm.install import (
    engine_env,
    installed_version,
    venv_python,
    vllm_binary,
    vllm_home,
)
from ttft.engines.vllm.make_model import MODEL_NAME, SIZES, ensure_model


@dataclass(frozen=True)
class VllmConfig:
    """What ``vllm serve`` is started with; ``extra_args`` go last, verbatim."""

    model: str | None = None  # a model folder; None: the local model ``local_model``
    # Which local model (dummy weights) when ``model`` is None: make_model.SIZES.
    local_model: str = MODEL_NAME
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free loopback port
    max_model_len: int = 4096
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    prefix_caching: bool | None = None  # None: the build's default (on in vLLM V1)
    enforce_eager: bool = True
    dtype: str = "float32"
    kv_blocks: int | None = None  # --num-gpu-blocks-override: a KV cache this many blocks long
    # The cores vLLM's processes run on and its OpenMP threads bind to (None: the build's own
    # choice): replicas side by side on one machine, each on cores of its own.
    cpu_cores: tuple[int, ...] | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)


def build_argv(config: VllmConfig, exe: str, model: str, load_dummy: bool) -> list[str]:
    argv = [exe, "serve", model, "--host", config.host, "--port", str(config.port)]
    argv += ["--dtype", config.dtype, "--max-model-len", str(config.max_model_len)]
    if config.served_model_name:
        argv += ["--served-model-name", config.served_model_name]
    if load_dummy:
        argv += ["--load-format", "dummy"]
    if config.enforce_eager:
        argv.append("--enforce-eager")
    if config.max_num_seqs is not None:
        argv += ["--max-num-seqs", str(config.max_num_seqs)]
    if config.max_num_batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(config.max_num_batched_tokens)]
    if config.prefix_caching is not None:
        argv.append(
            "--enable-prefix-caching" if config.prefix_caching else "--no-enable-prefix-caching"
        )
    if config.kv_blocks is not None:
        argv += ["--num-gpu-blocks-override", str(config.kv_blocks)]
    return argv + list(config.extra_args)


@dataclass
class RunningVllm:
    """A live vLLM we started: where to reach it and how to read it."""

    process: ServerProcess
    config: VllmConfig
    model_name: str
    startup_s: float

    @property
    def base_url(self) -> str:
        return f"http://{self.config.host}:{self.config.port}"

    @property
    def metrics_url(self) -> str:
        return self.base_url + ADAPTER.metrics_path

    @property
    def adapter(self) -> EngineAdapter:
        return ADAPTER

    @property
    def argv(self) -> list[str]:
        return list(self.process.argv)

    def stop(self) -> None:
        self.process.stop(grace_s=10.0)

    def __enter__(self) -> RunningVllm:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def require_vllm() -> Path:
    exe = vllm_binary()
    if not exe.exists():
        raise TtftError(
            f"vLLM is not installed (no {exe})",
            "install its CPU build into ttft's own environment for it: "
            "`python -m ttft.engines.vllm.install` (a few minutes, 3.5 GB) or "
            "scripts/install_vllm.sh",
        )
    return exe


def local_model(name: str = MODEL_NAME) -> Path:
    """The local model folder ``name`` (``make_model.SIZES``), built on first use."""
    if name not in SIZES:
        raise TtftError(f"no local vLLM model {name!r}", f"choose one of {', '.join(SIZES)}")
    try:
        return ensure_model(venv_python(), vllm_home(), name)
    except RuntimeError as exc:
        raise TtftError(
            str(exc), "reinstall: python -m ttft.engines.vllm.install --force"
        ) from None


def installed_flags() -> set[str]:
    """Every flag spelling ``vllm serve`` of the installed build accepts."""
    exe = require_vllm()
    version = installed_version() or "unknown"
    return flags_in_help(help_text(exe, version, engine_env(), vllm_home() / "help"))


def check_flags(argv: list[str]) -> None:
    """A clear error, before launch, for each flag the installed vLLM does not accept."""
    version = installed_version() or "unknown"
    problems = unknown_flags(argv[3:], installed_flags(), ADAPTER.flags, version)
    if problems:
        raise TtftError(
            "; ".join(problems),
            "change the launch command to this build's spelling (`vllm serve --help=all`)",
        )


def runnable_vllm_argv(argv: list[str]) -> tuple[list[str] | None, str]:
    """A ``vllm serve ...`` command as an argv ttft can start here (the installed build in
    place of ``vllm``), or None and the reason it cannot."""
    if len(argv) < 3 or argv[1] != "serve":
        return None, "service.launch is not `vllm serve MODEL ...`"
    exe = vllm_binary()
    if not exe.exists():
        return None, "vLLM is not installed here (python -m ttft.engines.vllm.install)"
    model = argv[2]
    local = model.startswith(("/", ".", "~"))  # else a hub name vLLM finds in its cache
    if local and not Path(model).expanduser().exists():
        return None, f"the model {model} in service.launch is not a folder on this machine"
    return [str(exe), *argv[1:]], ""


def launch_vllm(
    config: VllmConfig | None = None,
    *,
    startup_timeout_s: float = 600.0,
    log_path: Path | None = None,
) -> RunningVllm:
    """Start ``vllm serve`` for ``config`` and wait until ``/health`` answers 200."""
    config = config or VllmConfig()
    exe = str(require_vllm())
    if config.model is None:
        model, dummy = str(local_model(config.local_model)), True
        name = config.served_model_name or config.local_model
        config = dataclasses.replace(config, served_model_name=name)
    else:
        model, dummy = config.model, False
        name = config.served_model_name or config.model
    if config.port == 0:
        config = dataclasses.replace(config, port=free_loopback_port(config.host))
    else:
        ensure_port_free(config.host, config.port)
    argv = build_argv(config, exe, model, dummy)
    return start_argv(argv, config, name, startup_timeout_s=startup_timeout_s, log_path=log_path)


def start_argv(
    argv: list[str],
    config: VllmConfig,
    model_name: str,
    *,
    startup_timeout_s: float = 600.0,
    log_path: Path | None = None,
) -> RunningVllm:
    """Start a complete ``vllm serve`` argv listening at ``config``'s host and port."""
    check_flags(argv)
    env = engine_env()
    if config.cpu_cores is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in config.cpu_cores)
    process = ServerProcess(
        argv,
        health_url=f"http://{config.host}:{config.port}/health",
        name="vllm",
        env=env,
        log_path=log_path,
        cpu_cores=config.cpu_cores,
    )
    process.start()
    try:
        startup_s = process.wait_healthy(startup_timeout_s)
    except BaseException:
        process.stop()
        raise
    return RunningVllm(process=process, config=config, model_name=model_name, startup_s=startup_s)
