"""Where a chat template comes from: a ``.jinja`` file, a ``tokenizer_config.json``, a GGUF, or a
running llama-server's ``GET /props`` answer.

Every loader returns a :class:`ChatTemplate` whose ``origin`` names the file (and field), or the
server, so that a syntax error later points at the right place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.prompts.chat_template import ChatTemplate
from ttft.weights.gguf import GgufFormatError, read_gguf

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token")


def load_template(path: Path, name: str | None = None) -> ChatTemplate:
    """A template from a file, by its kind: ``.gguf``, ``.json`` (tokenizer_config) or Jinja text.

    ``name`` picks one of several named templates (``tool_use``, ``rag``) in a tokenizer_config.
    """
    if not path.is_file():
        raise TtftError(
            f"chat template file not found: {path}",
            "give a .jinja file, a tokenizer_config.json or a .gguf",
        )
    if path.suffix == ".gguf":
        return _from_gguf(path)
    if path.suffix == ".json":
        return _from_tokenizer_config(path, name)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read {path}: {exc}") from None
    return ChatTemplate(source=text, origin=str(path), path=str(path))


def template_from_props(props: Mapping[str, Any], server: str) -> ChatTemplate | None:
    """The chat template a llama-server applies, from its ``GET /props`` answer.

    ``chat_template`` is the Jinja text (the GGUF's own, or llama.cpp's built-in fallback when
    the GGUF has none); ``bos_token`` and ``eos_token``, where they are strings, become its
    special tokens. ``server`` names the server in the origin: ``GET {server}/props
    (chat_template)``. None when the answer holds no non-empty template (not a llama-server, or
    an empty answer from one that could not be reached): each caller says what to do in its own
    words, because the fix differs (a flag, a config key, dropping a step).
    """
    text = props.get("chat_template")
    if not isinstance(text, str) or not text:
        return None
    special = {k: v for k in ("bos_token", "eos_token") if isinstance(v := props.get(k), str)}
    return ChatTemplate(text, f"GET {server}/props (chat_template)", special)


def _from_gguf(path: Path) -> ChatTemplate:
    try:
        meta = read_gguf(path).chat_metadata()
    except GgufFormatError as exc:  # the bounded reader of weights verify: never a MemoryError
        raise TtftError(f"{path} is not a readable GGUF file: {exc.problem}", exc.fix) from None
    if "chat_template" not in meta:
        raise TtftError(
            f"{path} carries no tokenizer.chat_template: llama-server falls back to its built-in "
            "ChatML-style template for it",
            "lint against the server that serves it (--url, or no --template for the embedded "
            "engine), which reports the template it applies in GET /props",
        )
    special = {k: v for k, v in meta.items() if k in _SPECIAL_KEYS}
    return ChatTemplate(
        source=meta["chat_template"],
        origin=f"{path} (tokenizer.chat_template)",
        special_tokens=special,
    )


def _token_text(value: Any) -> str | None:
    # tokenizer_config stores a special token as a string or as an AddedToken dict {"content": ...}.
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _from_tokenizer_config(path: Path, name: str | None) -> ChatTemplate:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TtftError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(config, dict):
        raise TtftError(f"{path}: expected a JSON object (a tokenizer_config.json)")
    special = {k: t for k in _SPECIAL_KEYS if (t := _token_text(config.get(k))) is not None}
    raw = config.get("chat_template")
    origin = f"{path} (chat_template)"
    if raw is None:
        # Newer checkpoints keep the template beside the config, in chat_template.jinja.
        beside = path.with_name("chat_template.jinja")
        if beside.is_file():
            return ChatTemplate(
                beside.read_text(encoding="utf-8"), str(beside), special, path=str(beside)
            )
        raise TtftError(
            f"{path} has no chat_template field (and no chat_template.jinja beside it)",
            "give the template itself with --template FILE.jinja",
        )
    if isinstance(raw, list):
        named = {
            str(item.get("name")): str(item.get("template"))
            for item in raw
            if isinstance(item, dict)
        }
        pick = name or "default"
        if pick not in named:
            raise TtftError(
                f"{path}: no chat template named {pick!r} (it has {', '.join(sorted(named))})",
                "choose one with --template-name",
            )
        return ChatTemplate(named[pick], f"{path} (chat_template {pick!r})", special)
    if not isinstance(raw, str):
        raise TtftError(f"{path}: chat_template is neither a string nor a list of named templates")
    return ChatTemplate(raw, origin, special)
