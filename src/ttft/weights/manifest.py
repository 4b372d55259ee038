"""Checksum manifests in ``sha256sum`` format, so ``sha256sum -c weights.sha256`` works too.

GNU ``sha256sum -c`` skips lines that start with ``#``, so provenance lives in comment lines at the
top (``# source: URL``, ``# date: ...``). Entry paths are relative to the weights folder, written
the way coreutils writes them: a name holding a backslash, newline or carriage return gets a
leading backslash and escapes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from ttft.core.errors import TtftError
from ttft.core.findings import Finding
from ttft.weights.hashing import HashProgress, sha256_files
from ttft.weights.problems import problem

MANIFEST_NAME = "weights.sha256"
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")
MAX_MANIFEST_BYTES = 64 * 1024 * 1024

_GNU_LINE = re.compile(r"^(\\?)([0-9a-fA-F]{64}) ([ *])(.+)$", re.DOTALL)
_BSD_LINE = re.compile(r"^(\\?)SHA256 \((.+)\) = ([0-9a-fA-F]{64})$", re.DOTALL)
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    digest: str  # lower-case hex
    name: str  # POSIX path relative to the weights folder


@dataclass(slots=True)
class Manifest:
    entries: list[ManifestEntry] = field(default_factory=list)
    comments: dict[str, str] = field(default_factory=dict)  # "source", "date", ... from "# k: v"


def is_weight_file(name: str) -> bool:
    return name.endswith(WEIGHT_SUFFIXES)


def format_entry(digest: str, name: str) -> str:
    if any(ch in name for ch in _ESCAPES):
        escaped = "".join(_ESCAPES.get(ch, ch) for ch in name)
        return f"\\{digest}  {escaped}"
    return f"{digest}  {name}"


def format_manifest(entries: list[ManifestEntry], source: str | None, date: str) -> str:
    lines = ["# ttft weights manifest; check it with `sha256sum -c` in the weights folder"]
    if source:
        lines.append(f"# source: {source}")
    lines.append(f"# date: {date}")
    lines += [format_entry(e.digest, e.name) for e in sorted(entries, key=lambda e: e.name)]
    return "\n".join(lines) + "\n"


def _single_line(text: str) -> bool:
    return "\n" not in text and "\r" not in text


def _unescape(text: str) -> str:
    return re.sub(r"\\[\\nr]", lambda m: _UNESCAPES[m.group(0)], text)


def parse_manifest(text: str, label: str) -> tuple[Manifest, list[Finding]]:
    """Parse GNU (``HEX  name``, ``HEX *name``) and BSD (``SHA256 (name) = HEX``) lines."""
    manifest = Manifest()
    problems: list[Finding] = []
    seen: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep:
                manifest.comments.setdefault(key.strip().lower(), value.strip())
            continue
        gnu = _GNU_LINE.match(line)
        bsd = None if gnu else _BSD_LINE.match(line)
        if gnu:
            escaped, digest, name = gnu.group(1), gnu.group(2), gnu.group(4)
        elif bsd:
            escaped, name, digest = bsd.group(1), bsd.group(2), bsd.group(3)
        else:
            problems.append(
                problem(
                    label,
                    "manifest-line-invalid",
                    f"line {number} is not a sha256sum line",
                    expected="HEX  path",
                    found=repr(line[:80]),
                )
            )
            continue
        if escaped:
            name = _unescape(name)
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts:
            problems.append(
                problem(
                    label,
                    "manifest-path-invalid",
                    f"line {number} names {name!r}, which is outside the weights folder",
                )
            )
            continue
        name = str(pure)
        if name in seen:
            problems.append(
                problem(label, "manifest-duplicate", f"line {number} lists {name} a second time")
            )
            continue
        seen.add(name)
        manifest.entries.append(ManifestEntry(digest.lower(), name))
    return manifest, problems


def read_manifest(path: Path, label: str) -> tuple[Manifest | None, list[Finding]]:
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            return None, [
                problem(
                    label,
                    "manifest-too-large",
                    "manifest is too large",
                    expected=f"<= {MAX_MANIFEST_BYTES} bytes",
                    found=f"{size} bytes",
                )
            ]
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        return None, [problem(label, "read-error", f"cannot read manifest: {exc.strerror or exc}")]
    except UnicodeDecodeError as exc:
        return None, [
            problem(label, "manifest-not-utf8", f"manifest is not UTF-8 text (byte {exc.start})")
        ]
    return parse_manifest(text, label)


def list_files(root: Path, exclude: set[Path] | None = None) -> list[Path]:
    """Regular files under ``root``, sorted; dot-folders (.git, .cache) and ``exclude`` skipped."""
    skip = {p.resolve() for p in exclude or set()}
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            path = Path(folder) / name
            if path.is_file() and path.resolve() not in skip:
                found.append(path)
    return sorted(found)


def hash_bytes(path: Path, manifest: Path | None) -> int:
    """Bytes a run will hash, for the overall bar (files a manifest skips make it an estimate)."""
    if path.is_file():
        return path.stat().st_size
    skip = {manifest or path / MANIFEST_NAME}
    return sum(p.stat().st_size for p in list_files(path, exclude=skip))


def has_manifest(path: Path, manifest: Path | None) -> bool:
    """A manifest was given, or ``path`` is a folder with one in it."""
    return manifest is not None or (path.is_dir() and (path / MANIFEST_NAME).is_file())


def manifest_size(root: Path, manifest: Manifest) -> int:
    """Bytes of the files the manifest lists under ``root``."""
    return sum((root / e.name).stat().st_size for e in manifest.entries)


def relative_name(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def write_manifest(
    root: Path,
    *,
    source: str | None = None,
    date: str | None = None,
    output: Path | None = None,
    overwrite: bool = False,
    workers: int | None = None,
    progress: HashProgress | None = None,
) -> tuple[Path, Manifest]:
    """Hash every file under ``root`` and write the manifest (default ``root/weights.sha256``)."""
    if not root.is_dir():
        raise TtftError(f"{root} is not a folder", "pass the folder that holds the weight files")
    for what, text in (("source", source), ("date", date)):
        if text is not None and not _single_line(text):
            raise TtftError(f"the {what} must be one line of text", "remove line breaks from it")
    output = output or root / MANIFEST_NAME
    if output.exists() and not overwrite:
        raise TtftError(f"{output} already exists", "pass --force to replace it")
    files = list_files(root, exclude={output})
    if not files:
        raise TtftError(f"{root} holds no files to hash", "pass the folder with the weight files")
    results = sha256_files(files, workers=workers, progress=progress)
    failed = [r for r in results.values() if r.digest is None]
    if failed:
        raise TtftError(f"cannot read {failed[0].path}: {failed[0].error}")
    manifest = Manifest(
        entries=[ManifestEntry(str(r.digest), relative_name(p, root)) for p, r in results.items()],
        comments={"date": date or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
    )
    if source:
        manifest.comments["source"] = source
    text = format_manifest(manifest.entries, source, manifest.comments["date"])
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(output)
    return output, manifest
