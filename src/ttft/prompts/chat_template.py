"""Render chat templates the way Hugging Face's ``apply_chat_template`` does, without transformers.

The semantics that change the rendered text, and so the tokens a prefix cache sees:

- a sandboxed, immutable Jinja environment with ``trim_blocks`` and ``lstrip_blocks`` on;
- the ``loopcontrols`` extension (``{% break %}``, ``{% continue %}``) and a ``{% generation %}``
  block (used to mark assistant tokens for training masks) that renders its body unchanged;
- globals ``raise_exception(msg)`` (the template refuses the conversation) and
  ``strftime_now(fmt)`` (the current time: a template that calls it puts the clock in the prompt);
- a ``tojson`` filter that keeps non-ASCII as is (Jinja's own escapes HTML) and takes ``indent``,
  ``separators`` and ``sort_keys``;
- render variables ``messages``, ``tools``, ``documents``, ``add_generation_prompt`` and the special
  tokens (``bos_token``, ``eos_token``, ...), plus any extra template kwargs.

Errors become :class:`TtftError` with the template's origin and line, never a traceback.
"""

from __future__ import annotations

import importlib
import json
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ttft.core.errors import MissingExtraError, TtftError


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template's Jinja text and where it came from (for error messages)."""

    source: str
    origin: str  # e.g. "models/x/tokenizer_config.json (chat_template)", "GET http://.../props"
    special_tokens: Mapping[str, str] = field(default_factory=dict)  # bos_token, eos_token, ...
    # Set when the template is a file of its own, so that its line numbers are the file's.
    path: str | None = None

    def line_of(self, needle: str) -> int | None:
        """1-based line of the first occurrence of ``needle`` in the template text."""
        at = self.source.find(needle)
        return None if at < 0 else self.source.count("\n", 0, at) + 1


class TemplateRuntimeError(TtftError):
    """The template failed while rendering one conversation (raise_exception, a bad variable)."""


def _jinja() -> types.ModuleType:
    try:
        return importlib.import_module("jinja2")
    except ImportError:
        raise MissingExtraError("ttft lint prompts", "lint") from None


def hf_tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """The ``tojson`` filter of HF chat templates: plain ``json.dumps``, non-ASCII kept."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _Refusal(Exception):
    """Raised by the template's ``raise_exception``: the template rejects the conversation."""


def _raise_exception(message: str) -> None:
    raise _Refusal(message)


def _generation_extension(jinja2: types.ModuleType) -> type:
    """``{% generation %}...{% endgeneration %}``: renders the body; the tag only marks spans."""
    from jinja2 import nodes
    from jinja2.ext import Extension

    class GenerationBlock(Extension):
        tags = {"generation"}  # noqa: RUF012 (jinja2 declares it as a class-level set)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    return GenerationBlock


class TemplateRenderer:
    """Compiles one :class:`ChatTemplate` and renders conversations with it.

    ``clock`` replaces the current time seen by ``strftime_now``, so callers can render the same
    conversation at two instants and see whether the template itself puts the time in the prompt.
    """

    def __init__(self, template: ChatTemplate, clock: Callable[[], datetime] | None = None) -> None:
        self.template = template
        self.clock = clock or datetime.now
        jinja2 = _jinja()
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self._jinja2 = jinja2
        # A loader (not from_string) so that runtime tracebacks name the template: that is how
        # a failure deep in a render is mapped back to a template line.
        self._name = "chat_template"
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_generation_extension(jinja2), "jinja2.ext.loopcontrols"],
            loader=jinja2.FunctionLoader(lambda name: (template.source, self._name, lambda: True)),
        )
        env.filters["tojson"] = hf_tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = lambda fmt: self.clock().strftime(fmt)
        self.uses_clock = "strftime_now" in template.source
        try:
            self._compiled: Any = env.get_template(self._name)
        except jinja2.exceptions.TemplateSyntaxError as exc:
            raise TtftError(
                f"{template.origin}: line {exc.lineno}: chat template syntax error: {exc.message}",
                "fix the Jinja at that line (the template is Jinja2 as Hugging Face renders it)",
            ) from None

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        where: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt text for one conversation. ``where`` names the request in error messages."""
        variables: dict[str, Any] = dict(self.template.special_tokens)
        variables.update(extra or {})
        variables.update(
            messages=messages, tools=tools, add_generation_prompt=add_generation_prompt
        )
        variables.setdefault("documents", None)
        what = f" for {where}" if where else ""
        try:
            return str(self._compiled.render(**variables))
        except _Refusal as exc:
            raise TemplateRuntimeError(
                f"{self._at(exc)}: the chat template refused the conversation{what}: {exc}",
                "change the request so the template accepts it (roles, order, content types), "
                "or use the template the model is served with",
            ) from None
        except (
            self._jinja2.exceptions.TemplateError,
            TypeError,
            ValueError,
            AttributeError,
            KeyError,
            IndexError,
        ) as exc:
            raise TemplateRuntimeError(
                f"{self._at(exc)}: the chat template failed{what}: {type(exc).__name__}: {exc}",
                "check that the request's messages have the shape this template expects",
            ) from None

    def _at(self, exc: BaseException) -> str:
        line = self._template_line(exc)
        return f"{self.template.origin}: line {line}" if line else self.template.origin

    def _template_line(self, exc: BaseException) -> int | None:
        """The deepest traceback line that belongs to the template (Jinja rewrites frames so)."""
        line = getattr(exc, "lineno", None)
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self._name:
                line = tb.tb_lineno
            tb = tb.tb_next
        return line if isinstance(line, int) else None
