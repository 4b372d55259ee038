"""The flags of the vLLM build that is installed, read from its own ``vllm serve --help=all``.

ttft's flag table (``flags.py``) was written from vLLM's sources and release notes; a build may
have renamed or dropped a flag since. Before ttft launches vLLM with a flag, it asks the installed
build, so a renamed flag is a clear message naming the replacement instead of a failed launch.
The help text takes about 20 s to print on two cores, so it is kept per version under the vLLM
home (``<home>/help/<version>.txt``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.engines.flags import FlagSpec

_OPTION = re.compile(r"^\s{2}(-[^\s,][^\s,]*)(?: [^\s,]+)?((?:,\s+-[^\s,]+(?: [^\s,]+)?)*)", re.M)


def flags_in_help(text: str) -> set[str]:
    """Every option spelling a ``--help`` listing shows at the start of an entry."""
    found: set[str] = set()
    for match in _OPTION.finditer(text):
        found.add(match.group(1))
        for extra in re.findall(r",\s+(-[^\s,]+)", match.group(2) or ""):
            found.add(extra)
    return found


def help_text(exe: Path, version: str, env: Mapping[str, str], cache_dir: Path) -> str:
    """``vllm serve --help=all`` of the installed build, cached per version."""
    cached = cache_dir / f"{re.sub(r'[^A-Za-z0-9.+_-]', '_', version)}.txt"
    if cached.exists():
        return cached.read_text()
    proc = subprocess.run(
        [str(exe), "serve", "--help=all"],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=300,
        check=False,
    )
    if proc.returncode != 0 or "--max-num-seqs" not in proc.stdout:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise TtftError(f"`{exe} serve --help=all` failed:\n{tail}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached.write_text(proc.stdout)
    return proc.stdout


def unknown_flags(
    argv: Iterable[str], installed: set[str], table: Mapping[str, FlagSpec], version: str
) -> list[str]:
    """One message per flag in ``argv`` that the installed build does not accept."""
    problems: list[str] = []
    for token in argv:
        if not token.startswith("-") or token in ("-", "--"):
            continue
        name = token.split("=", 1)[0]
        if name.startswith("-cc.") or name.startswith("--compilation-config."):
            continue  # dotted sub-options of the compilation config
        spelled = name.replace("_", "-") if name.startswith("--") else name
        if name in installed or spelled in installed:
            continue
        spec = table.get(spelled)
        why = f"vLLM {version} has no flag {name}"
        if spec is not None and spec.replacement.startswith("nothing"):
            note = spec.replacement[len("nothing") :].strip()
            why += f" (ttft's table: {spec.status}{' ' + note if note else ''})"
        elif spec is not None and spec.replacement:
            why += f" (ttft's table: {spec.status}, use {spec.replacement} instead)"
        elif spec is not None:
            why += " (ttft's table knows it from another vLLM version)"
        problems.append(why)
    return problems
