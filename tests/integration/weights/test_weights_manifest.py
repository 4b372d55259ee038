"""Checksum manifests: written in sha256sum format that coreutils' `sha256sum -c` accepts, read
back by verify, hashed on threads; and the `ttft weights` CLI's output and exit codes."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from weights_testkit import make_sharded

from ttft.cli.main import cli
from ttft.core.errors import TtftError
from ttft.weights import VerifyOptions, verify, write_manifest
from ttft.weights.hashing import sha256_files
from ttft.weights.manifest import format_entry, parse_manifest

needs_sha256sum = pytest.mark.skipif(shutil.which("sha256sum") is None, reason="no coreutils")


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    make_sharded(folder)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    return folder


def test_manifest_has_source_and_date_comments_and_one_sorted_line_per_file(ckpt: Path) -> None:
    path, manifest = write_manifest(
        ckpt, source="https://huggingface.co/org/model", date="2025-01-02"
    )
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# ttft weights manifest")
    assert lines[1:3] == ["# source: https://huggingface.co/org/model", "# date: 2025-01-02"]
    names = [line.split("  ", 1)[1] for line in lines[3:]]
    assert names == sorted(names) and "weights.sha256" not in names and len(names) == 5
    digest = hashlib.sha256((ckpt / "config.json").read_bytes()).hexdigest()
    assert f"{digest}  config.json" in lines
    assert manifest.comments == {"source": "https://huggingface.co/org/model", "date": "2025-01-02"}


@needs_sha256sum
def test_coreutils_sha256sum_accepts_the_manifest_with_its_comment_lines(ckpt: Path) -> None:
    write_manifest(ckpt, source="https://example.org/m")
    result = subprocess.run(
        ["sha256sum", "-c", "--strict", "weights.sha256"], cwd=ckpt, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": OK") == 5 and result.stderr == ""


@needs_sha256sum
def test_odd_file_names_are_escaped_the_way_sha256sum_writes_and_reads_them(tmp_path: Path) -> None:
    names = ["with space.bin", "back\\slash.bin", "new\nline.bin", "star*.bin"]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(bytes([i]) * 10)
    path, _ = write_manifest(tmp_path)
    ours = [line for line in path.read_text().split("\n") if line and not line.startswith("#")]
    theirs = subprocess.run(
        ["sha256sum", *sorted(names)], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert ours == [line for line in theirs if line]
    check = subprocess.run(["sha256sum", "-c", path.name], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr
    parsed, problems = parse_manifest(path.read_text(), path.name)
    assert problems == [] and sorted(e.name for e in parsed.entries) == sorted(names)


def test_bsd_tagged_and_binary_mode_lines_are_read_too() -> None:
    digest = "ab" * 32
    text = f"SHA256 (a.gguf) = {digest}\n{digest} *b.gguf\n{format_entry(digest, 'c d')}\n"
    manifest, problems = parse_manifest(text, "m")
    assert problems == [] and [e.name for e in manifest.entries] == ["a.gguf", "b.gguf", "c d"]


def test_malformed_escaping_and_duplicate_lines_are_problems_with_line_numbers() -> None:
    digest = "ab" * 32
    text = f"# c\nnot a line\n{digest}  ../up.bin\n{digest}  a\n{digest}  a\n"
    _, problems = parse_manifest(text, "m")
    assert [p.code for p in problems] == [
        "manifest-line-invalid",
        "manifest-path-invalid",
        "manifest-duplicate",
    ]
    assert "line 2" in problems[0].message and "line 5" in problems[2].message


def test_existing_manifest_is_not_replaced_without_force(ckpt: Path) -> None:
    write_manifest(ckpt)
    with pytest.raises(TtftError, match="already exists"):
        write_manifest(ckpt)
    write_manifest(ckpt, overwrite=True)


def test_verify_checks_a_manifest_found_in_the_folder(ckpt: Path) -> None:
    write_manifest(ckpt)
    report = verify(ckpt)
    assert report.ok and report.manifest == "weights.sha256"
    assert {f.path: f.sha256 for f in report.files if f.format != "manifest"} == {
        "config.json": "ok",
        "model-00001-of-00003.safetensors": "ok",
        "model-00002-of-00003.safetensors": "ok",
        "model-00003-of-00003.safetensors": "ok",
        "model.safetensors.index.json": "ok",
    }


def test_listed_file_missing_from_disk_fails(ckpt: Path) -> None:
    write_manifest(ckpt)
    (ckpt / "config.json").unlink()
    report = verify(ckpt)
    (problem,) = report.problems
    assert problem.code == "manifest-file-missing" and problem.file == "config.json"
    assert not report.ok


def test_unlisted_weight_file_fails_but_an_unlisted_readme_only_warns(ckpt: Path) -> None:
    write_manifest(ckpt)
    (ckpt / "README.md").write_text("hello")
    report = verify(ckpt)
    assert report.ok and [(p.file, p.severity) for p in report.problems] == [
        ("README.md", "warning")
    ]
    (ckpt / "extra.gguf").write_bytes(b"")
    problems = {(p.file, p.code, p.severity) for p in verify(ckpt).problems}
    assert ("extra.gguf", "manifest-unlisted", "error") in problems


def test_manifest_elsewhere_is_used_with_paths_relative_to_the_checked_folder(
    ckpt: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "sums.sha256"
    write_manifest(ckpt, output=outside)
    assert not (ckpt / "weights.sha256").exists()
    report = verify(ckpt, VerifyOptions(manifest=outside))
    assert report.ok and all(f.sha256 == "ok" for f in report.files if f.format != "manifest")


def test_parallel_hasher_matches_hashlib_and_reports_every_byte(tmp_path: Path) -> None:
    paths = []
    for i in range(5):
        path = tmp_path / f"f{i}"
        path.write_bytes(bytes([i]) * (i * 3_000_000 + 7))
        paths.append(path)
    seen: dict[Path, int] = {}
    lock = threading.Lock()

    class Counter:
        def start(self, path: Path, size: int) -> None:
            with lock:
                seen[path] = 0

        def advance(self, path: Path, nbytes: int) -> None:
            with lock:
                seen[path] += nbytes

        def finish(self, path: Path) -> None:
            pass

    results = sha256_files(paths, workers=3, progress=Counter())
    for path in paths:
        assert results[path].digest == hashlib.sha256(path.read_bytes()).hexdigest()
        assert seen[path] == path.stat().st_size


def test_cli_verify_prints_a_table_and_exits_0_when_clean(ckpt: Path) -> None:
    result = CliRunner().invoke(cli, ["weights", "verify", str(ckpt)])
    assert result.exit_code == 0, result.output
    assert "model-00002-of-00003.safetensors" in result.output.replace("\n", "")
    assert "OK" in result.output


def test_cli_verify_exits_1_and_names_every_problem(ckpt: Path) -> None:
    (ckpt / "model-00002-of-00003.safetensors").unlink()
    result = CliRunner().invoke(cli, ["weights", "verify", str(ckpt)])
    assert result.exit_code == 1
    assert "shard-missing" in result.output and "FAILED" in result.output
    assert "Traceback" not in result.output


def test_cli_verify_json_has_a_versioned_schema_and_per_file_problems(ckpt: Path) -> None:
    (ckpt / "model-00003-of-00003.safetensors").write_bytes(b"\x00" * 4)
    result = CliRunner().invoke(cli, ["weights", "verify", "--json", str(ckpt)])
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["schema"] == "ttft.weights.verify/1" and data["ok"] is False
    (broken,) = [f for f in data["files"] if f["problems"]]
    assert broken["path"] == "model-00003-of-00003.safetensors"
    assert broken["problems"][0]["code"] == "file-too-short"


def test_cli_manifest_then_verify_catches_a_flipped_byte(ckpt: Path) -> None:
    runner = CliRunner()
    written = runner.invoke(cli, ["weights", "manifest", str(ckpt), "--source", "https://x.y/z"])
    assert written.exit_code == 0 and "5 files" in written.output
    path = ckpt / "model-00001-of-00003.safetensors"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x80
    path.write_bytes(bytes(raw))
    result = runner.invoke(cli, ["weights", "verify", "--json", str(ckpt)])
    assert result.exit_code == 1
    codes = [p["code"] for f in json.loads(result.output)["files"] for p in f["problems"]]
    assert codes == ["sha256-mismatch"]


def test_installed_command_exits_1_when_verify_finds_a_problem(ckpt: Path) -> None:
    (ckpt / "model-00001-of-00003.safetensors").unlink()
    code = "from ttft.cli.main import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", code, "weights", "verify", str(ckpt)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "shard-missing" in result.stdout
    clean = ckpt.parent / "clean"
    clean.mkdir()
    make_sharded(clean)
    result = subprocess.run(
        [sys.executable, "-c", code, "weights", "verify", str(clean)], capture_output=True
    )
    assert result.returncode == 0


def test_installed_command_exits_2_with_a_clear_message_for_a_missing_folder(
    tmp_path: Path,
) -> None:
    code = "from ttft.cli.main import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", code, "weights", "verify", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr


def test_installed_command_exits_2_for_a_folder_without_weight_files(tmp_path: Path) -> None:
    code = "from ttft.cli.main import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", code, "weights", "verify", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "holds no weight files" in result.stderr


def test_rich_progress_bars_track_hashing_on_a_terminal_without_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from rich.console import Console

    from ttft.cli import weights as cli_weights

    big = tmp_path / "big.bin"
    big.write_bytes(b"\x01" * 1000)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    monkeypatch.setattr(cli_weights, "LARGE_FILE_BYTES", 10)  # the small file gets its own bar
    with cli_weights._RichHashProgress(console, 1000) as progress:
        results = sha256_files([big], progress=progress)
    assert results[big].digest == hashlib.sha256(big.read_bytes()).hexdigest()
    assert "sha256" in out.getvalue()
