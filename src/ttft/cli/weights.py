"""``ttft weights``: verify weight files and write checksum manifests, without loading weights."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import TracebackType

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from ttft.report.weights import document_text, print_report, size_text, stdout_console
from ttft.weights import MANIFEST_NAME, VerifyOptions, verify, write_manifest
from ttft.weights.manifest import has_manifest, hash_bytes, manifest_size

# Files below this get no bar of their own: they finish before a bar would be readable.
LARGE_FILE_BYTES = 64 * 1024 * 1024


class _RichHashProgress:
    """Hash progress as rich bars on stderr: one for all bytes, one per large file."""

    def __init__(self, console: Console, total_bytes: int) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._lock = threading.Lock()
        self._total = self._progress.add_task("sha256", total=total_bytes)
        self._tasks: dict[Path, TaskID] = {}

    def __enter__(self) -> _RichHashProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def start(self, path: Path, size: int) -> None:
        if size >= LARGE_FILE_BYTES:
            with self._lock:
                self._tasks[path] = self._progress.add_task(f"  {path.name}", total=size)

    def advance(self, path: Path, nbytes: int) -> None:
        self._progress.advance(self._total, nbytes)
        task = self._tasks.get(path)
        if task is not None:
            self._progress.advance(task, nbytes)

    def finish(self, path: Path) -> None:
        with self._lock:
            task = self._tasks.pop(path, None)
        if task is not None:
            self._progress.remove_task(task)


@click.group()
def weights() -> None:
    """Verify weight files (safetensors, GGUF) and checksum manifests without loading them."""


@weights.command("verify")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--manifest",
    type=click.Path(path_type=Path),
    default=None,
    help=f"Checksum manifest to check. Default: PATH/{MANIFEST_NAME} when it exists.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (= --format json).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "sarif"]),
    default="text",
    show_default=True,
    help="text for people, json (schema ttft.weights.verify/1), markdown for tickets, sarif "
    "for code-scanning UIs.",
)
@click.option(
    "--no-hash", is_flag=True, help="Check structure and manifest entries, but hash nothing."
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="Hashing threads (default: CPUs)."
)
def verify_cmd(
    path: Path,
    manifest: Path | None,
    as_json: bool,
    fmt: str,
    no_hash: bool,
    workers: int | None,
) -> None:
    """Check PATH (a folder or one file) without loading any tensor data.

    safetensors: the index against the shards (missing or extra shards and tensors) and every
    header (length, JSON, dtypes, offsets, sizes, truncation). GGUF: header, metadata, tensor
    infos and data layout. With a weights.sha256 manifest (or --manifest), every listed file's
    SHA-256. Exit code 0 when everything holds (warnings allowed), 1 when an error was found,
    2 when the input cannot be checked at all (missing path, no weight files).
    """
    options = VerifyOptions(manifest=manifest, check_hashes=not no_hash, workers=workers)
    err = Console(stderr=True)
    if has_manifest(path, manifest) and not no_hash and err.is_terminal and path.exists():
        with _RichHashProgress(err, hash_bytes(path, manifest)) as progress:
            report = verify(path, options, progress)
    else:
        report = verify(path, options)
    if fmt == "text" and not as_json:
        print_report(stdout_console(report), report)
    else:
        click.echo(document_text(report, "json" if as_json else fmt))
    if not report.ok:
        # SystemExit rather than ctx.exit: click's non-standalone main() returns ctx.exit codes
        # instead of raising them, and ttft's main() would then exit 0.
        sys.exit(1)


@weights.command("manifest")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--source", default=None, help="Where the files came from (URL), for the header.")
@click.option("--date", default=None, help="Date for the header. Default: now, UTC, ISO 8601.")
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help=f"Where to write the manifest. Default: DIRECTORY/{MANIFEST_NAME}.",
)
@click.option("--force", is_flag=True, help="Replace an existing manifest.")
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="Hashing threads (default: CPUs)."
)
def manifest_cmd(
    directory: Path,
    source: str | None,
    date: str | None,
    output: Path | None,
    force: bool,
    workers: int | None,
) -> None:
    """Write a sha256sum-format manifest of every file under DIRECTORY.

    The file stays readable by `sha256sum -c` (run it inside DIRECTORY); `ttft weights verify`
    checks it automatically when it sits in the folder.
    """
    err = Console(stderr=True)
    started = time.perf_counter()
    if err.is_terminal and directory.is_dir():
        with _RichHashProgress(err, hash_bytes(directory, output)) as progress:
            written, manifest = write_manifest(
                directory,
                source=source,
                date=date,
                output=output,
                overwrite=force,
                workers=workers,
                progress=progress,
            )
    else:
        written, manifest = write_manifest(
            directory, source=source, date=date, output=output, overwrite=force, workers=workers
        )
    total = manifest_size(directory, manifest)
    elapsed = time.perf_counter() - started
    click.echo(
        f"wrote {written}: {len(manifest.entries)} files, {size_text(total)}, "
        f"hashed in {elapsed:.1f} s"
    )
    target = written.name if written.parent.resolve() == directory.resolve() else written.resolve()
    click.echo(f"check it with: cd {directory} && sha256sum -c {target}", err=True)
