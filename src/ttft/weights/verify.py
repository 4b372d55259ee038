"""`ttft weights verify`: every check on a folder (or one file), gathered into one report.

Structure first (cheap: headers only), then the checksum manifest (reads every byte). Problems are
results, not exceptions: only a path that does not exist or holds nothing to check raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.findings import Finding
from ttft.weights.gguf import GgufFile
from ttft.weights.gguf_check import check_gguf, check_gguf_splits
from ttft.weights.hashing import HashProgress, sha256_files
from ttft.weights.index import (
    INDEX_SUFFIX,
    SafetensorsIndex,
    check_index_against_shards,
    check_shard_names,
    read_index,
)
from ttft.weights.manifest import (
    MANIFEST_NAME,
    is_weight_file,
    list_files,
    read_manifest,
    relative_name,
)
from ttft.weights.problems import VerifyReport, problem
from ttft.weights.safetensors import SafetensorsHeader, check_safetensors


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    manifest: Path | None = None  # default: weights.sha256 in the folder, when present
    check_hashes: bool = True
    workers: int | None = None


class _Run:
    def __init__(self, root: Path, report: VerifyReport) -> None:
        self.root = root
        self.report = report
        self.headers: dict[Path, SafetensorsHeader | None] = {}

    def label(self, path: Path) -> str:
        try:
            return relative_name(path, self.root)
        except ValueError:
            return str(path)

    def add(self, problems: list[Finding]) -> None:
        for found in problems:
            self.report.add(found)

    def safetensors(self, path: Path) -> SafetensorsHeader | None:
        if path not in self.headers:
            header, problems = check_safetensors(path, self.label(path))
            entry = self.report.file(self.label(path), "safetensors")
            entry.format = "safetensors"
            entry.size_bytes = path.stat().st_size
            entry.tensors = len(header.names) if header else None
            self.add(problems)
            self.headers[path] = header
        return self.headers[path]

    def index(self, path: Path) -> SafetensorsIndex | None:
        label = self.label(path)
        self.report.file(label, "safetensors-index").size_bytes = path.stat().st_size
        index, problems = read_index(path, label)
        self.add(problems)
        if index is None:
            return None
        self.report.file(label).tensors = len(index.weight_map)
        shard_labels: dict[str, str] = {}
        shard_headers: dict[str, SafetensorsHeader | None] = {}
        for shard in index.shards:
            shard_path = path.parent / shard
            shard_labels[shard] = self.label(shard_path)
            if shard_path.is_file():
                shard_headers[shard] = self.safetensors(shard_path)
            else:
                self.report.file(shard_labels[shard], "safetensors")
        self.add(check_shard_names(index, label))
        self.add(check_index_against_shards(index, label, shard_labels, shard_headers))
        return index

    def gguf(self, path: Path) -> GgufFile | None:
        label = self.label(path)
        entry = self.report.file(label, "gguf")
        entry.size_bytes = path.stat().st_size
        gguf, problems = check_gguf(path, label)
        entry.tensors = len(gguf.tensors) if gguf else None
        self.add(problems)
        return gguf


def verify(
    path: Path, options: VerifyOptions | None = None, progress: HashProgress | None = None
) -> VerifyReport:
    """Check the weight files at ``path`` (a folder, or one file) and the checksum manifest."""
    options = options or VerifyOptions()
    if not path.exists():
        raise TtftError(f"{path} does not exist", "pass the folder that holds the weight files")
    single = path.is_file()
    root = path.parent if single else path
    manifest = options.manifest
    if manifest is None and (root / MANIFEST_NAME).is_file():
        manifest = root / MANIFEST_NAME
    elif manifest is not None and not manifest.is_file():
        raise TtftError(
            f"manifest {manifest} does not exist",
            "pass the path of a weights.sha256 file, or drop --manifest",
        )
    candidates = [path] if single else list_files(root, exclude={manifest} if manifest else None)

    report = VerifyReport(root=str(path))
    run = _Run(root, report)
    indexes = [p for p in candidates if p.name.endswith(INDEX_SUFFIX)]
    safetensors = [p for p in candidates if p.name.endswith(".safetensors")]
    ggufs = [p for p in candidates if p.name.endswith(".gguf")]
    if not (indexes or safetensors or ggufs or manifest):
        raise TtftError(
            f"{path} holds no weight files (*.safetensors, *.safetensors.index.json, *.gguf) "
            "and no weights.sha256",
            "pass the folder that holds the weight files",
        )

    parsed = [(p, idx) for p in indexes if (idx := run.index(p)) is not None]
    for p in safetensors:
        if p in run.headers:
            continue
        owner = next(
            (i for ip, i in parsed if ip.parent == p.parent and _shares_prefix(p, i)), None
        )
        run.safetensors(p)
        if owner is not None:
            report.add(
                problem(
                    run.label(p),
                    "shard-unexpected",
                    f"{p.name} sits beside {owner.path.name} but the index does not list it "
                    f"(the index lists {len(owner.shards)} shards)",
                    expected="listed in the index or absent",
                    found="on disk, unlisted",
                )
            )
    ggufs_read = {p: g for p in ggufs if (g := run.gguf(p)) is not None}
    run.add(check_gguf_splits(ggufs_read, run.label))

    if manifest is not None:
        report.manifest = run.label(manifest)
        _check_manifest(run, manifest, candidates if single else None, options, progress)
    report.files.sort(key=lambda f: f.path)
    return report


def _shares_prefix(shard: Path, index: SafetensorsIndex) -> bool:
    name, prefix = shard.name, index.prefix
    return name.startswith(prefix) and name[len(prefix) : len(prefix) + 1] in ("-", ".", "_")


def _check_manifest(
    run: _Run,
    manifest_path: Path,
    only: list[Path] | None,
    options: VerifyOptions,
    progress: HashProgress | None,
) -> None:
    report, root = run.report, run.root
    label = run.label(manifest_path)
    report.file(label, "manifest").size_bytes = manifest_path.stat().st_size
    manifest, problems = read_manifest(manifest_path, label)
    run.add(problems)
    if manifest is None:
        return
    wanted = {run.label(p) for p in only} if only is not None else None
    entries = [e for e in manifest.entries if wanted is None or e.name in wanted]
    listed = {e.name for e in manifest.entries}
    present: dict[Path, str] = {}
    for entry in entries:
        target = root / entry.name
        row = report.file(entry.name, _format_of(entry.name))
        if target.is_file():
            present[target] = entry.digest
            row.size_bytes = target.stat().st_size
        else:
            row.sha256 = "missing"
            report.add(
                problem(
                    entry.name,
                    "manifest-file-missing",
                    f"{entry.name} is listed in {label} but is not on disk",
                    expected="file present",
                    found="missing",
                )
            )
    if options.check_hashes and present:
        results = sha256_files(list(present), workers=options.workers, progress=progress)
        for target, want in present.items():
            name, result = run.label(target), results[target]
            if result.digest is None:
                report.add(problem(name, "read-error", f"cannot read file: {result.error}"))
            elif result.digest == want:
                report.file(name).sha256 = "ok"
            else:
                report.file(name).sha256 = "mismatch"
                report.add(
                    problem(
                        name,
                        "sha256-mismatch",
                        f"content does not match its SHA-256 in {label}: the bytes "
                        "changed since the manifest was written",
                        expected=want,
                        found=result.digest,
                    )
                )
    on_disk = only if only is not None else list_files(root, exclude={manifest_path})
    for path in on_disk:
        name = run.label(path)
        if name in listed:
            continue
        weight = is_weight_file(name)
        report.file(name, _format_of(name)).sha256 = "unlisted"
        report.add(
            problem(
                name,
                "manifest-unlisted",
                f"{name} is not listed in {label}, so its bytes are not checked",
                severity="error" if weight else "warning",
            )
        )


def _format_of(name: str) -> str:
    if name.endswith(INDEX_SUFFIX):
        return "safetensors-index"
    if name.endswith(".safetensors"):
        return "safetensors"
    if name.endswith(".gguf"):
        return "gguf"
    return "other"
