"""Apply ``TextEdit``s to nginx configuration text, and show the result as a unified diff.

Pure functions: the caller reads the files and writes the results. ``apply_edits`` takes the text of
every file (keyed by the path strings the parsed directives carry) and a list of edits that were
all written against those original texts, e.g. the edits of several plan steps one after another.
Each edit is located on the original text (the directive that starts on its line and reads as its
``old``), so edits never see each other's line shifts; they are then applied back to front. Edits
that touch the same text, or an ``old`` that is not on its line, are an error naming the place.

The tokenizer follows nginx's own reading rules where they matter for finding a directive's end:
quotes (with backslash escapes) may hold ``;``, ``{`` and ``#``; ``#`` starts a comment only where a
token could start; ``${var}`` inside a word is not a block.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.text_edits import TextEdit

__all__ = ["apply_edits", "unified_diff"]

_RETRY = "lint the configuration again and apply the edits it gives now"


@dataclass
class _Statement:
    """One directive in the text: its words as written, where it starts, where it ends."""

    words: tuple[str, ...]
    line: int  # 1-based line of the first word (what crossplane reports as the directive's line)
    start: int  # offset of the first word
    end: int  # offset just past the terminating `;` or the block's closing `}`
    brace: int | None = None  # offset just past the block's `{`; None for a simple directive


@dataclass(frozen=True)
class _Span:
    """A piece of the original text to swap for ``text`` (``start == end``: a pure insertion)."""

    start: int
    end: int
    text: str
    edit: TextEdit


def apply_edits(texts: Mapping[str, str], edits: Sequence[TextEdit]) -> dict[str, str]:
    """Every file of ``texts``, with ``edits`` applied (files no edit touches are unchanged).

    Identical edits count once, so plan steps that share an edit combine. Raises ``TtftError`` for
    an edit of a file not in ``texts``, an ``old`` not found at its line, or overlapping edits.
    """
    unique = list(dict.fromkeys(edits))
    out = dict(texts)
    for file in dict.fromkeys(e.file for e in unique):
        if file not in texts:
            raise TtftError(f"{file}: an edit is for a file that is not part of the configuration")
        ours = [e for e in unique if e.file == file]
        out[file] = _apply_file(file, texts[file], ours)
    return out


def unified_diff(original: Mapping[str, str], patched: Mapping[str, str]) -> str:
    """A unified diff (``a/PATH``, ``b/PATH`` labels, as ``patch -p1`` reads) of changed files."""
    chunks: list[str] = []
    for path in dict.fromkeys([*original, *patched]):
        before = original.get(path, "")
        after = patched.get(path, before)
        if before == after:
            continue
        lines = difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
        for line in lines:
            # A last line without a newline gets git's marker, so the diff still applies.
            chunks.append(
                line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            )
    return "".join(chunks)


# --- applying ---------------------------------------------------------------------------------


def read_edited_files(edits: Sequence[TextEdit], base: Path | None = None) -> dict[str, str]:
    """The current text of every file the edits touch (relative paths under ``base``)."""
    texts: dict[str, str] = {}
    for edit in edits:
        if edit.file in texts:
            continue
        path = Path(edit.file)
        if not path.is_absolute() and base is not None:
            path = base / path
        try:
            texts[edit.file] = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TtftError(
                f"cannot read {edit.file} for the plan's edit: {exc.strerror or exc}",
                "give the configuration's path as nginx reads it, or fix the plan's file key",
            ) from None
    return texts


def edits_diff(edits: Sequence[TextEdit], base: Path | None = None) -> str:
    """The edits as a unified diff against the files as they are now."""
    texts = read_edited_files(edits, base)
    return unified_diff(texts, apply_edits(texts, edits))


def _apply_file(file: str, text: str, edits: Sequence[TextEdit]) -> str:
    statements = _parse(file, text)
    spans: list[_Span] = []
    inserts: dict[int, list[TextEdit]] = {}  # block start offset -> inserts into it, in order
    blocks: dict[int, _Statement] = {}
    for edit in edits:
        target = _locate(file, text, statements, edit)
        if edit.action == "insert":
            inserts.setdefault(target.start, []).append(edit)
            blocks[target.start] = target
        elif edit.action == "replace":
            spans.append(_Span(target.start, target.end, _terminated(edit.new), edit))
        else:
            spans.append(_delete_span(text, target, edit))
    for start, group in inserts.items():
        spans.append(_insert_span(text, statements, blocks[start], group))
    _check_overlaps(file, spans)
    for span in sorted(spans, key=lambda s: (s.start, s.end), reverse=True):
        text = text[: span.start] + span.text + text[span.end :]
    return text


def _locate(file: str, text: str, statements: Sequence[_Statement], edit: TextEdit) -> _Statement:
    want = _normal(_words(edit.old))
    on_line = [s for s in statements if s.line == edit.line]
    for statement in on_line:
        if _normal(statement.words) != want:
            continue
        if edit.action == "insert" and statement.brace is None:
            raise TtftError(
                f"{file}:{edit.line}: cannot insert into `{edit.old}`: it is not a block", _RETRY
            )
        return statement
    if on_line:
        found = "; ".join(" ".join(s.words) for s in on_line)
    else:
        lines = text.splitlines()
        found = lines[edit.line - 1].strip() if 0 < edit.line <= len(lines) else ""
        found = found or f"no directive (the file has {len(lines)} lines)"
    raise TtftError(f"{file}:{edit.line}: expected `{edit.old}`, found `{found}`", _RETRY)


def _terminated(new: str) -> str:
    """``new`` as a directive: the ``;`` is optional in an edit (a block ends with its ``}``)."""
    text = new.strip()
    return text if text.endswith((";", "}")) else text + ";"


def _delete_span(text: str, target: _Statement, edit: TextEdit) -> _Span:
    line_start = text.rfind("\n", 0, target.start) + 1
    line_end = text.find("\n", target.end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if not text[line_start : target.start].strip() and not text[target.end : line_end].strip():
        # Nothing else on the line: the line goes, so no blank line is left behind.
        return _Span(line_start, line_end, "", edit)
    return _Span(target.start, target.end, "", edit)


def _insert_span(
    text: str, statements: Sequence[_Statement], block: _Statement, group: Sequence[TextEdit]
) -> _Span:
    assert block.brace is not None
    indent = _child_indent(text, statements, block)
    lines = "".join("\n" + indent + _terminated(e.new).replace("\n", "\n" + indent) for e in group)
    brace_line_end = text.find("\n", block.brace)
    brace_line_end = len(text) if brace_line_end < 0 else brace_line_end
    rest = text[block.brace : brace_line_end]
    if not rest.strip() or rest.lstrip().startswith("#"):
        # The `{` ends its line (perhaps with a comment): the new lines go right below it.
        return _Span(brace_line_end, brace_line_end, lines, group[0])
    # A one-line block (`location / { proxy_pass http://x; }`): the new lines go after the `{`
    # and what followed it moves to a line of its own.
    blank = len(rest) - len(rest.lstrip())
    return _Span(block.brace, block.brace + blank, lines + "\n" + indent, group[0])


def _child_indent(text: str, statements: Sequence[_Statement], block: _Statement) -> str:
    """The indentation of the block's first child on a line of its own, else one level deeper."""
    assert block.brace is not None
    own = _indent_at(text, block.start)
    for child in statements:
        if block.brace <= child.start < block.end:
            line_start = text.rfind("\n", 0, child.start) + 1
            first_on_line = not text[line_start : child.start].strip()
            deeper = _indent_at(text, child.start)
            if first_on_line and line_start > block.brace and len(deeper) > len(own):
                return deeper
            break
    return own + ("\t" if own.startswith("\t") else "    ")


def _indent_at(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    line = text[line_start:offset]
    return line[: len(line) - len(line.lstrip())]


def _check_overlaps(file: str, spans: Sequence[_Span]) -> None:
    for i, first in enumerate(spans):
        for second in spans[i + 1 :]:
            if _overlap(first, second):
                a, b = sorted((first.edit, second.edit), key=lambda e: e.line)
                raise TtftError(
                    f"{file}:{b.line}: edits overlap: `{a.action} {a.old}` (line {a.line}) and "
                    f"`{b.action} {b.old}` (line {b.line}) change the same text",
                    "apply them in separate steps, each against the file as it is then",
                )


def _overlap(a: _Span, b: _Span) -> bool:
    """Two changes of the same text; an insertion at either end of a replaced piece is not one."""
    if a.start < a.end and b.start < b.end:
        return max(a.start, b.start) < min(a.end, b.end)
    if a.start == a.end:
        return b.start < a.start < b.end
    return a.start < b.start < a.end


# --- reading nginx's syntax -------------------------------------------------------------------


def _normal(words: Sequence[str]) -> str:
    """Words compared as nginx reads them: quotes and escapes do not matter, nor spacing."""
    return " ".join(w.replace('"', "").replace("'", "").replace("\\", "") for w in words)


def _words(text: str) -> tuple[str, ...]:
    """The words of an edit's ``old`` (``proxy_buffering on;``, ``location /v1/ {``)."""
    out: list[str] = []
    try:
        for kind, raw, _start, _end, _line in _tokens("<edit>", text):
            if kind != "word":
                break
            out.append(raw)
    except TtftError:
        return tuple(text.rstrip(";{ \t").split())
    return tuple(out)


def _parse(file: str, text: str) -> list[_Statement]:
    """Every directive of the text, nested ones included, in the order they start."""
    out: list[_Statement] = []
    open_blocks: list[_Statement] = []
    words: list[str] = []
    start = line = 0
    for kind, raw, tok_start, tok_end, tok_line in _tokens(file, text):
        if kind == "word":
            if not words:
                start, line = tok_start, tok_line
            words.append(raw)
        elif kind == ";":
            if words:
                out.append(_Statement(tuple(words), line, start, tok_end))
            words = []
        elif kind == "{":
            if not words:
                start, line = tok_start, tok_line
            block = _Statement(tuple(words), line, start, -1, tok_end)
            out.append(block)
            open_blocks.append(block)
            words = []
        else:  # "}"
            if words:
                raise TtftError(f"{file}:{line}: `{' '.join(words)}` has no terminating `;`")
            if not open_blocks:
                raise TtftError(f"{file}:{tok_line}: unexpected `}}`")
            open_blocks.pop().end = tok_end
    if words:
        raise TtftError(f"{file}:{line}: `{' '.join(words)}` has no terminating `;`")
    if open_blocks:
        block = open_blocks[-1]
        raise TtftError(f"{file}:{block.line}: `{' '.join(block.words)}` block is never closed")
    return out


def _tokens(file: str, text: str) -> Iterator[tuple[str, str, int, int, int]]:
    """(kind, raw text, start, end, line) for each word, ``;``, ``{`` and ``}``."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in ";{}":
            yield c, c, i, i + 1, line
            i += 1
        elif c in "\"'":
            start, start_line = i, line
            i += 1
            while i < n and text[i] != c:
                if text[i] == "\\":
                    i += 1
                if i < n and text[i] == "\n":
                    line += 1
                i += 1
            if i >= n:
                raise TtftError(f"{file}:{start_line}: unterminated quote")
            i += 1
            yield "word", text[start:i], start, i, start_line
        else:
            start, in_variable = i, False
            while i < n:
                c = text[i]
                if c == "\\":
                    i += 2
                    continue
                if c.isspace() or c == ";":
                    break
                if c == "{":
                    if text[i - 1] != "$":
                        break
                    in_variable = True  # `${name}`: part of the word, not a block
                elif c == "}":
                    if not in_variable:
                        break
                    in_variable = False
                i += 1
            i = min(i, n)
            yield "word", text[start:i], start, i, line
