"""The automatic fixes against a real nginx: the patched fixture configs are ones ``nginx -t``
accepts, and linting them again finds no streaming problem at warning or error; and the CLI's
``--diff`` / ``--write-fixed`` around them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from nginx_testkit import NGINX_DATA, lint_file

from ttft.cli.main import cli
from ttft.core.findings import Severity
from ttft.lint.nginx.config import load
from ttft.lint.nginx.fixes import nginx_change
from ttft.proxy.nginx_edit import apply_edits
from ttft.testing.nginx import nginx_binary, nginx_test, prepare_prefix

STREAMING = ("nginx/proxy-buffering", "nginx/gzip-event-stream")
MAIN_FILE = {"site-fragment": "llm-proxy.conf"}
# What includes a site file on a real server: nginx.conf's http block.
FRAGMENT_HOST = "events {}\n\nhttp {\n    include llm-proxy.conf;\n}\n"


@pytest.fixture(scope="module")
def nginx() -> str:
    binary = nginx_binary()
    assert binary is not None, "nginx is not installed: apt-get install -y nginx-light"
    return binary


def _copy(name: str, dest: Path) -> Path:
    shutil.copytree(NGINX_DATA / name, dest)
    return dest / MAIN_FILE.get(name, "nginx.conf")


def _without_certificates(text: str) -> str:
    """The site file's TLS lines need certbot's files, which this machine has not; they are
    commented out (same line count) since the fixes never touch them."""
    text = re.sub(r"(?m)^(\s*)(include /etc/letsencrypt/|ssl_certificate)", r"\1# \2", text)
    return text.replace("listen 443 ssl;", "listen 443;")


def _nginx_accepts(nginx: str, root: Path, main: Path, prefix: Path) -> None:
    files = {
        p.relative_to(root).as_posix(): p.read_text()
        for p in root.rglob("*")
        if p.is_file() and p != main
    }
    if main.name == "nginx.conf":
        main_text = main.read_text()
    else:
        files[main.name] = _without_certificates(main.read_text())
        main_text = FRAGMENT_HOST
    check = nginx_test(prepare_prefix(prefix, main_text, files), prefix, nginx=nginx)
    assert check.ok, check.output


@pytest.mark.nginx
@pytest.mark.parametrize("name", ["bad", "mixed", "inheritance", "site-fragment"])
def test_patched_fixtures_pass_nginx_t_and_lint_clean_for_streaming(
    nginx: str, name: str, tmp_path: Path
) -> None:
    main = _copy(name, tmp_path / "conf")
    config = load(main)
    change = nginx_change(lint_file(main))
    texts = {f: Path(f).read_text() for f in config.files}
    patched = apply_edits(texts, change.edits if change is not None else ())
    for file, text in patched.items():
        Path(file).write_text(text)
    if name in ("bad", "site-fragment"):
        assert change is not None and patched != texts

    _nginx_accepts(nginx, tmp_path / "conf", main, tmp_path / "prefix")
    left = [f for f in lint_file(main) if f.rule in STREAMING and f.severity >= Severity.WARNING]
    assert left == [], [f"{f.rule} {f.location}" for f in left]


@pytest.mark.nginx
def test_write_fixed_writes_a_copy_nginx_accepts(nginx: str, tmp_path: Path) -> None:
    main = _copy("bad", tmp_path / "conf")
    out = tmp_path / "fixed"
    result = CliRunner().invoke(cli, ["lint", "nginx", str(main), "--write-fixed", str(out)])
    assert result.exit_code == 1, result.output  # the report still gates on the original
    assert "Traceback" not in result.output
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["conf.d/llm.conf", "mime.types", "nginx.conf", "snippets/proxy-headers.conf"]
    assert (out / "nginx.conf").read_text() == main.read_text()  # unchanged files copied as is
    assert "proxy_buffering off;" in (out / "conf.d" / "llm.conf").read_text()
    assert "proxy_buffering off;" not in (tmp_path / "conf" / "conf.d" / "llm.conf").read_text()
    _nginx_accepts(nginx, out, out / "nginx.conf", tmp_path / "prefix")


def test_diff_is_relative_to_the_given_files_folder_and_applies_there(tmp_path: Path) -> None:
    main = _copy("bad", tmp_path / "conf")
    result = CliRunner().invoke(cli, ["lint", "nginx", str(main), "--diff", "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("--- a/conf.d/llm.conf\n+++ b/conf.d/llm.conf\n")
    assert "+        proxy_buffering off;\n" in result.stdout
    assert "no automatic change" in result.stderr and "nginx/proxy-cache" in result.stderr
    patch = shutil.which("patch")
    if patch is not None:  # the diff applies with the ordinary tool, as documented
        subprocess.run(
            [patch, "-p1", "-s"], input=result.stdout, text=True, cwd=main.parent, check=True
        )
        assert "proxy_buffering off;" in (main.parent / "conf.d" / "llm.conf").read_text()


def test_ignored_rules_are_not_applied(tmp_path: Path) -> None:
    main = _copy("bad", tmp_path / "conf")
    args = ["lint", "nginx", str(main), "--diff", "--ignore", "nginx/proxy-read-timeout"]
    result = CliRunner().invoke(cli, args)
    assert "proxy_read_timeout 300s" not in result.stdout
    assert "proxy_buffering off;" in result.stdout


def test_nothing_to_fix_is_a_message_not_an_error(tmp_path: Path) -> None:
    main = _copy("clean", tmp_path / "conf")
    out = tmp_path / "fixed"
    for extra in (["--diff"], ["--write-fixed", str(out)]):
        result = CliRunner().invoke(cli, ["lint", "nginx", str(main), *extra])
        assert result.exit_code == 0, result.output
        assert "nothing to fix automatically" in result.stderr
        assert "---" not in result.stdout and "Traceback" not in result.output
    assert not out.exists()


def test_write_fixed_never_overwrites_the_configuration(tmp_path: Path) -> None:
    main = _copy("bad", tmp_path / "conf")
    before = (main.parent / "conf.d" / "llm.conf").read_text()
    result = CliRunner().invoke(
        cli, ["lint", "nginx", str(main), "--write-fixed", str(main.parent)]
    )
    assert result.exit_code == 2
    assert "would overwrite the configuration" in result.output
    assert (main.parent / "conf.d" / "llm.conf").read_text() == before
