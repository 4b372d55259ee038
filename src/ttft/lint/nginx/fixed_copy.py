"""``ttft lint nginx --diff`` and ``--write-fixed DIR``: the findings' automatic changes applied to
a copy of the user's configuration (includes followed), shown as a diff or written out.

Paths are relative to the folder of the file the user gave (``a/conf.d/llm.conf``), so the diff
applies with ``patch -p1`` there and ``DIR`` mirrors that folder; an included file outside it (an
absolute include such as ``/etc/nginx/snippets/x.conf``) is named by its base name.

The edits are applied by the caller's ``ApplyEdits`` (``proxy.nginx_edit.apply_edits``: lint sits
below the proxy layer); the messages are returned for the caller to print on stderr.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.findings import Finding, Severity
from ttft.core.text_edits import TextEdit
from ttft.lint.nginx.config import NginxConfig
from ttft.lint.nginx.fixes import nginx_change

# (files' texts by name, edits) -> the texts with the edits applied
ApplyEdits = Callable[[Mapping[str, str], Sequence[TextEdit]], dict[str, str]]


@dataclass(frozen=True)
class NginxFix:
    """The configuration's files before and after, keyed by the names they are shown under."""

    change: Change | None
    original: dict[str, str]
    patched: dict[str, str]
    manual: tuple[Finding, ...]  # warnings and errors that no edit fixes
    sources: dict[str, str]  # name -> the file it was read from
    main_name: str

    @property
    def changed(self) -> list[str]:
        return [name for name, text in self.patched.items() if text != self.original[name]]


def fixed_names(main: Path, files: Sequence[str]) -> dict[str, str]:
    """Each file's name in the diff and under ``--write-fixed``: relative to the main's folder."""
    base = main.resolve().parent
    out: dict[str, str] = {}
    for file in files:
        resolved = Path(file).resolve()
        try:
            name = resolved.relative_to(base).as_posix()
        except ValueError:
            name = resolved.name
        if name in out.values():
            raise TtftError(
                f"{file}: another included file would also be written as {name}",
                "lint a copy of the configuration gathered under one folder",
            )
        out[file] = name
    return out


def build_fix(
    main: Path, config: NginxConfig, findings: Sequence[Finding], apply_edits: ApplyEdits
) -> NginxFix:
    """Read the configuration's files and apply every finding's edits to a copy."""
    names = fixed_names(main, config.files)
    texts: dict[str, str] = {}
    for file in config.files:
        try:
            # surrogateescape: bytes that are not UTF-8 come back out as they went in.
            texts[file] = Path(file).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            raise TtftError(f"{file}: cannot be read ({exc.strerror})") from None
    change = nginx_change(findings)
    patched = apply_edits(texts, change.edits if change is not None else ())
    manual = tuple(
        f
        for f in findings
        if f.severity >= Severity.WARNING and f.change is None and f.rule != "nginx/config-error"
    )
    return NginxFix(
        change,
        {names[f]: t for f, t in texts.items()},
        {names[f]: t for f, t in patched.items()},
        manual,
        {name: f for f, name in names.items()},
        names.get(config.main_file, main.name),
    )


def write_fixed(fix: NginxFix, out_dir: Path) -> str:
    """Every file of the configuration under ``out_dir``, patched; never over the originals.
    What was written, as a line."""
    if fix.change is None:
        return f"nothing written to {out_dir}"
    originals = {Path(f).resolve() for f in fix.sources.values()}
    targets = {name: out_dir / name for name in fix.patched}
    for target in targets.values():
        if target.resolve() in originals:
            raise TtftError(
                f"{out_dir}: writing there would overwrite the configuration ({target})",
                "give --write-fixed another folder; review the copy, then install it",
            )
    try:
        for name, target in targets.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(fix.patched[name], encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise TtftError(f"{out_dir}: cannot write the fixed copy ({exc.strerror})") from None
    changed = ", ".join(fix.changed) or "none"
    return (
        f"wrote {len(targets)} file(s) to {out_dir} (changed: {changed}); check them with "
        f"nginx -t -c {out_dir / fix.main_name}"
    )


def summary(fix: NginxFix) -> list[str]:
    """What the automatic change does, or that there is none, and what it leaves."""
    if fix.change is None:
        lines = ["nothing to fix automatically: no finding has an automatic change"]
    else:
        lines = [f"{fix.change.label}, to {', '.join(fix.changed)}"]
    if fix.manual:
        shown = ", ".join(
            f"{f.rule} ({f.location.display()})" if f.location else f.rule for f in fix.manual
        )
        lines.append(f"no automatic change (fix by hand, see the report): {shown}")
    return lines
