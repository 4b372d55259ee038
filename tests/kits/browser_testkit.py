"""A headless Chromium (Debian package ``chromium``) that loads a page and reports what it saw."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 60.0
_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
    "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0",
    # Nothing may be fetched: a page that needs the network shows it as a failed load.
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
)  # fmt: skip


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass(frozen=True)
class Loaded:
    dom: str
    console_errors: list[str]

    def attribute(self, name: str, tag: str = "body") -> str | None:
        match = re.search(rf"<{tag}[^>]*\s" + re.escape(name) + r'="([^"]*)"', self.dom)
        return None if match is None else match.group(1)


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    binary = chromium_binary()
    assert binary is not None, "chromium is not installed (scripts/test.sh installs it)"
    return subprocess.run(
        [binary, *_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


def load(page: Path, profile: Path) -> Loaded:
    """The DOM after the page's scripts ran, and the console errors chromium logged."""
    done = _run(["--dump-dom", page.resolve().as_uri()], profile)
    errors = [
        line for line in done.stderr.splitlines()
        if ("CONSOLE" in line and ("Uncaught" in line or "Error" in line))
        or "net::ERR" in line
    ]  # fmt: skip
    return Loaded(done.stdout, errors)


def screenshot(page: Path, out: Path, profile: Path, size: str = "1200,2400") -> None:
    _run([f"--screenshot={out}", f"--window-size={size}", page.resolve().as_uri()], profile)
