"""Turn an engine's launch command line into flags we can reason about.

Understands ``vllm serve MODEL ...``, ``python -m vllm.entrypoints.openai.api_server ...``,
``python -m sglang.launch_server ...``, ``sglang serve ...`` and ``llama-server ...`` (any path),
with leading ``VAR=value`` environment assignments, ``--flag=value`` forms and (vLLM) underscores in
flag names. Container command lines are understood when the image is one of the engines' own
(``vllm/vllm-openai``, ``ghcr.io/ggml-org/llama.cpp:server``); the arguments after the image are the
engine's. A command line may come as tokens (``ttft lint engine -- vllm serve ...``), as one quoted
string, or from a shell script / Dockerfile line, in which case each token keeps its line number.
What it builds (``EngineCommand``) is defined in ``engines/command.py``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.engines.adapter import EngineAdapter
from ttft.engines.command import COMMAND_LINE as COMMAND_LINE  # parse()'s default source
from ttft.engines.command import Arg, EngineCommand, Token
from ttft.engines.flags import FlagSpec
from ttft.engines.registry import adapter_for, adapters

# --- reading command lines ------------------------------------------------------------------


def tokens_from_argv(argv: list[str]) -> list[Token]:
    """Tokens given on our own command line; a single string with spaces is split like a shell."""
    if len(argv) == 1 and (" " in argv[0] or "\n" in argv[0]):
        return tokens_from_text(argv[0])
    return [Token(t, i) for i, t in enumerate(argv)]


def tokens_from_text(text: str, first_line: int | None = None) -> list[Token]:
    """Split shell text (with ``\\`` continuations) into tokens that remember their line."""
    out: list[Token] = []
    lines = text.splitlines() or [""]
    for offset, raw in enumerate(lines):
        line = raw.rstrip()
        if line.endswith("\\"):
            line = line[:-1]
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            where = f" (line {first_line + offset})" if first_line is not None else ""
            raise TtftError(
                f"cannot split the command line{where}: {exc}", "check the quotes"
            ) from None
        for word in words:
            line_no = first_line + offset if first_line is not None else None
            out.append(Token(word, len(out), line_no))
    return out


_LAUNCHER = re.compile(
    r"(^|[\s/\"'])(vllm\s+serve|sglang\s+serve|llama-server(\.exe)?)\b|vllm\.entrypoints|"
    r"sglang\.launch_server|vllm-openai|llama\.cpp:(full-|light-)?server"
)


def command_tokens(from_file: Path | None, argv: list[str]) -> tuple[list[Token], str]:
    """The command line given as arguments or read from a file (one, not both), and where it
    came from."""
    if from_file is not None and argv:
        raise TtftError("give the command line or --from-file, not both")
    if from_file is not None:
        return command_from_file(from_file)
    if argv:
        return tokens_from_argv(argv), COMMAND_LINE
    raise TtftError("no command line given", "ttft lint engine -- vllm serve MODEL [flags...]")


def command_from_file(path: Path) -> tuple[list[Token], str]:
    """The first engine launch command in a shell script, Dockerfile or compose-style file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TtftError(f"{path}: no such file", "pass a script that launches the engine") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"{path}: cannot read ({exc})") from None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        block = [lines[i]]
        while block[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            block.append(lines[i])
        i += 1
        joined = " ".join(block)
        stripped = joined.lstrip()
        if stripped.startswith("#") or re.match(r"(?i)FROM\s", stripped):
            continue  # a comment, or the base image of a Dockerfile
        if not _LAUNCHER.search(re.sub(r"[\\\",\[\]]", " ", joined)):  # also JSON arrays
            continue
        # Dockerfile instructions and `exec` are not part of the engine's command line.
        first = re.sub(r"^\s*(RUN|CMD|ENTRYPOINT|exec)\s+", "", block[0])
        if first.lstrip().startswith("["):  # Dockerfile exec form: a JSON array
            return _json_form(first, block[1:], start + 1, path), str(path)
        return tokens_from_text("\n".join([first, *block[1:]]), start + 1), str(path)
    raise TtftError(
        f"{path}: no vllm, sglang or llama-server command found",
        "pass the command line after -- instead",
    )


def _json_form(first: str, rest: list[str], line: int, path: Path) -> list[Token]:
    text = " ".join([first, *rest]).replace("\\", " ")
    try:
        words = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TtftError(f"{path}:{line}: not a valid JSON array ({exc.msg})") from None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise TtftError(f"{path}:{line}: the exec form must be a JSON array of strings")
    return [Token(w, i, line) for i, w in enumerate(words)]


# --- detecting the engine -------------------------------------------------------------------


def _strip_env(tokens: list[Token]) -> tuple[list[Token], list[tuple[str, str]]]:
    env: list[tuple[str, str]] = []
    rest = list(tokens)
    if rest and rest[0].text == "env":
        rest = rest[1:]
    while rest and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", rest[0].text):
        key, _, value = rest[0].text.partition("=")
        env.append((key, value))
        rest = rest[1:]
    return rest, env


def detect(tokens: list[Token], engine: str | None = None) -> tuple[str, list[Token]]:
    """The engine and the tokens that are its arguments (after ``serve``, the module, the image).

    Each registered engine recognises its own launchers; the earliest match on the line wins.
    """
    rest, _env = _strip_env(tokens)
    if engine is not None:
        return engine, _after_launcher(rest, adapter_for(engine))
    texts = [t.text for t in rest]
    linted = [a for a in adapters() if a.flags]
    for i in range(len(texts)):
        for adapter in linted:
            taken = adapter.launcher_at(texts, i)
            if taken is not None:
                return adapter.kind, rest[i + taken :]
    names = ", ".join(f"`{a.help_command.removesuffix(' --help')}`" for a in linted)
    kinds = "|".join(a.kind for a in linted)
    raise TtftError(
        "cannot tell which engine this command line starts",
        f"start it with one of {names}, or pass --engine {kinds}",
    )


def _after_launcher(tokens: list[Token], adapter: EngineAdapter) -> list[Token]:
    """With --engine given: the arguments start at the first flag (after ``python -m MODULE``)."""
    i = 0
    while i < len(tokens):
        text = tokens[i].text
        if text == "-m" and not adapter.module_flag_is_model:  # else -m is the model flag
            i += 2
            continue
        if text.startswith("-"):
            return tokens[i:]
        i += 1
    return []


# --- parsing flags --------------------------------------------------------------------------


def parse(
    tokens: list[Token], engine: str | None = None, source: str = COMMAND_LINE
) -> EngineCommand:
    """Parse a whole command line (environment, launcher, flags) into an ``EngineCommand``."""
    if not tokens:
        raise TtftError("empty command line", "pass the engine's command line after --")
    _rest, env = _strip_env(tokens)
    kind, arg_tokens = detect(tokens, engine)
    adapter = adapter_for(kind)
    table = adapter.flags
    args: list[Arg] = []
    positionals: list[Token] = []
    i = 0
    while i < len(arg_tokens):
        tok = arg_tokens[i]
        text = tok.text
        if not text.startswith("-") or _is_number(text):
            positionals.append(tok)
            i += 1
            continue
        flag, eq, inline = text.partition("=")
        if adapter.accepts_underscores and flag.startswith("--"):
            flag = flag.replace("_", "-")  # e.g. vLLM's parser accepts --max_num_seqs
        spec = table.get(flag) or _by_prefix(adapter, flag)
        nxt = arg_tokens[i + 1].text if i + 1 < len(arg_tokens) else None
        value: str | None
        consumed = 1
        if spec is None:
            # Unknown flag: guess that a following non-flag token is its value.
            if eq:
                value = inline
            elif nxt is not None and (not nxt.startswith("-") or _is_number(nxt)):
                value, consumed = nxt, 2
            else:
                value = None
        elif eq:
            value = inline
        elif spec.kind == "v":
            if nxt is None:
                value = None
            else:
                value, consumed = nxt, 2
        elif spec.kind == "n":
            values = []
            j = i + 1
            while j < len(arg_tokens) and not arg_tokens[j].text.startswith("-"):
                values.append(arg_tokens[j].text)
                j += 1
            value, consumed = " ".join(values), j - i
        elif spec.kind == "o":
            if nxt is not None and not nxt.startswith("-") and _looks_like_choice(nxt):
                value, consumed = nxt, 2
            else:
                value = None
        else:  # f, b
            value = "false" if flag in spec.negative else "true"
        args.append(Arg(flag, spec, value, tok))
        i += consumed
    if adapter.env_flags:
        args = _env_args(adapter, env, args, tokens)
    return EngineCommand(kind, tuple(tokens), tuple(args), tuple(positionals), tuple(env), source)


def _is_number(text: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", text) is not None


def _looks_like_choice(text: str) -> bool:
    return text.lower() in {"on", "off", "auto", "true", "false", "1", "0", "enabled", "disabled"}


def _by_prefix(adapter: EngineAdapter, flag: str) -> FlagSpec | None:
    """argparse accepts unambiguous prefixes of long flags (SGLang's ``--tp`` is ``--tp-size``)."""
    if not adapter.accepts_prefixes or not flag.startswith("--") or len(flag) < 4:
        return None
    table = adapter.flags
    matches = {spec.canonical: spec for name, spec in table.items() if name.startswith(flag)}
    return next(iter(matches.values())) if len(matches) == 1 else None


def _env_args(
    adapter: EngineAdapter, env: list[tuple[str, str]], args: list[Arg], tokens: list[Token]
) -> list[Arg]:
    """Environment variables (llama-server's ``LLAMA_ARG_*``) act as flags when the command line
    does not set the same flag."""
    table = adapter.flags
    out = list(args)
    given = {a.canonical for a in args}
    for key, value in env:
        flag = adapter.env_flags.get(key)
        if flag is None:
            continue
        spec = table[flag]
        if spec.canonical in given:
            continue
        token = next((t for t in tokens if t.text.startswith(key + "=")), tokens[0])
        if spec.kind in ("f", "b"):
            value = "true" if value.lower() in ("1", "true", "on", "enabled") else "false"
        out.insert(0, Arg(key, spec, value, token))
    return out
