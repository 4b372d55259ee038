"""``ttft tune frontend``: where the template and the tokenizer spend time on your own prompts.

Sources, in order: the template from --chat-template, else from the server's ``GET /props``
(--url, or the embedded llama-server started for it and stopped after: that is llama.cpp's
built-in fallback when the GGUF carries no template). The tokenizers from --model, else from the
served GGUF when /props names a file on this machine, else from the embedded model's GGUF.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.prompts.chat_template import ChatTemplate
from ttft.tune.frontend_report import FrontendReport, to_json
from ttft.workload.tokenizer import Tokenizer


class FrontendInputError(click.ClickException):
    """Bad input (a missing file, no template): exit code 2 and one line, never a traceback."""

    exit_code = 2


@dataclass
class _Server:
    target: Target
    props: dict[str, Any]


@contextlib.contextmanager
def _server(url: str | None, model: Path | None, needed: bool) -> Iterator[_Server | None]:
    """The server to read /props and time /tokenize on: --url, or the embedded one if needed."""
    from ttft.engines.control import PROPS, ControlClient

    if url is not None:
        target = Target(url)
        # send, not props(): an unreachable --url must say so, not look like a server without
        # a template.
        yield _Server(target, ControlClient(target).send(PROPS))
        return
    if not needed:
        yield None
        return
    from ttft.engines.llamacpp.embedded import launch_embedded

    click.echo("starting the embedded engine (llama-server) for its chat template ...", err=True)
    overrides: dict[str, Any] = {"ctx_size": 4096, "parallel": 1}
    if model is not None:
        overrides["model_path"] = model
    with launch_embedded(**overrides) as engine:
        target = Target(engine.base_url)
        yield _Server(target, ControlClient(target).send(PROPS))


def _template(path: Path | None, server: _Server | None) -> ChatTemplate:
    if path is not None:
        from ttft.prompts.sources import load_template

        return load_template(path)
    assert server is not None
    text = server.props.get("chat_template")
    if not isinstance(text, str) or not text:
        raise TtftError(
            f"{server.target.root}/props gives no chat template (not a llama-server?)",
            "give the template with --chat-template (a .jinja, tokenizer_config.json or .gguf)",
        )
    special = {
        k: str(v) for k in ("bos_token", "eos_token") if isinstance(v := server.props.get(k), str)
    }
    return ChatTemplate(text, f"GET {server.target.root}/props (chat_template)", special)


def _gguf(model: Path | None, server: _Server | None) -> Path:
    if model is not None:
        return model
    served = server.props.get("model_path") if server is not None else None
    if isinstance(served, str) and served.endswith(".gguf") and Path(served).is_file():
        return Path(served)
    if server is not None:
        raise TtftError(
            f"{server.target.root}/props names no GGUF file on this machine to build the "
            "tokenizers from",
            "give the served model's file with --model FILE.gguf",
        )
    from ttft.engines.llamacpp.embedded import embedded_model_path

    return embedded_model_path()


def _tokenizers(gguf: Path) -> tuple[Tokenizer, Tokenizer]:
    """(Python, Rust): one vocabulary and merge list, two merge loops."""
    from ttft.workload.gguf_tokenizer import GgufTokenizer, build_backend, load_vocab_and_merges
    from ttft.workload.spm_python import PythonBpe

    vocab, merges = load_vocab_and_merges(gguf)
    return GgufTokenizer(vocab, PythonBpe(vocab, merges)), GgufTokenizer(
        vocab, build_backend(vocab, merges)
    )


def run_frontend(
    request_log: Path,
    url: str | None,
    model: Path | None,
    chat_template: Path | None,
    repeats: int,
) -> FrontendReport:
    """The whole flow, with every input problem as a TtftError."""
    from ttft.engines.control import ServerTokenizer
    from ttft.tune.frontend import measure_frontend
    from ttft.workload.request_log import load_request_log

    requests = load_request_log(request_log)
    if chat_template is not None and not chat_template.is_file():
        raise TtftError(
            f"chat template file not found: {chat_template}",
            "give a .jinja file, a tokenizer_config.json or a .gguf",
        )
    if model is not None and not model.is_file():
        raise TtftError(f"GGUF file not found: {model}", "give the model's .gguf file with --model")
    with _server(url, model, needed=chat_template is None) as server:
        template = _template(chat_template, server)
        gguf = _gguf(model, server)
        python_tok, rust_tok = _tokenizers(gguf)
        sources = {"template": template.origin, "tokenizer": str(gguf)}
        if server is not None:
            sources["server"] = server.target.root
        return measure_frontend(
            requests,
            template,
            python_tokenizer=python_tok,
            rust_tokenizer=rust_tok,
            server_tokenizer=ServerTokenizer(server.target) if server is not None else None,
            repeats=repeats,
            sources=sources,
        )


# -- output ----------------------------------------------------------------------------------


def _rows(report: FrontendReport) -> list[list[str]]:
    return [
        [s.stage, f"{s.p50_ms:.3f}", f"{s.p95_ms:.3f}", f"{s.mean_ms:.3f}", f"{s.cold_ms:.3f}"]
        for s in report.stages
    ]


_HEAD = ["stage", "p50 ms", "p95 ms", "mean ms", "cold ms"]


def _saved(ms: float) -> str:
    return f"saves {ms:.3f} ms" if ms >= 0 else f"costs {-ms:.3f} ms more"


def _lines(report: FrontendReport) -> tuple[list[str], list[str], list[str]]:
    """(savings, cache, problems) as sentences, shared by text and markdown."""
    savings = [
        f"{s.change}: {_saved(s.ms_per_request)} per request (best request {s.max_ms:.3f} ms; "
        f"{s.alternative} takes {s.ratio:.2f}x the time of {s.anchor})"
        for s in report.savings
    ]
    c = report.cache
    cache = [
        f"pre-render cache over this log in one pass: {c.requests - c.static_parts} hit(s) of "
        f"{c.requests}, {_saved(c.saving_ms_per_request)} per request; with dynamic content "
        f"moved last {c.requests - c.static_parts_moved} hit(s), "
        f"{_saved(c.saving_ms_per_request_moved)} per request (estimates from the medians)"
    ]
    problems = [
        f"mismatch: {m.tokenizer} tokenizer on {m.where}: {m.tokens} tokens vs {m.rust_tokens} "
        f"(Rust), first difference at token {m.first_difference}"
        for m in report.mismatches
    ]
    return savings, cache, problems


def render_text(report: FrontendReport) -> str:
    table = [_HEAD, *_rows(report)]
    widths = [max(len(row[k]) for row in table) for k in range(len(_HEAD))]
    out = [f"{k}: {v}" for k, v in report.sources.items()]
    out.append(f"{len(report.requests)} request(s), {report.repeats} warm runs each (+1 cold)")
    out.append("")
    for row in table:
        cells = [
            c.ljust(w) if k == 0 else c.rjust(w)
            for k, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells))
    savings, cache, problems = _lines(report)
    out += ["", *savings, *cache, *problems]
    out += [f"warning: {w}" for w in report.warnings]
    return "\n".join(out)


def render_markdown(report: FrontendReport) -> str:
    out = ["## Frontend cost", ""]
    out += [f"- {k}: `{v}`" for k, v in report.sources.items()]
    out += [f"- {len(report.requests)} request(s), {report.repeats} warm runs each (+1 cold)", ""]
    out.append("| " + " | ".join(_HEAD) + " |")
    out.append("|" + "---|" * len(_HEAD))
    out += ["| " + " | ".join(row) + " |" for row in _rows(report)]
    savings, cache, problems = _lines(report)
    out += ["", *[f"- {line}" for line in savings + cache + problems]]
    if report.warnings:
        out += ["", "Warnings:", "", *[f"- {w}" for w in report.warnings]]
    return "\n".join(out)


def execute_frontend(
    request_log: Path,
    url: str | None,
    model: Path | None,
    chat_template: Path | None,
    repeats: int,
    fmt: str,
) -> None:
    try:
        report = run_frontend(request_log, url, model, chat_template, repeats)
    except TtftError as exc:
        fix = f" (fix: {exc.fix})" if exc.fix else ""
        raise FrontendInputError(f"{exc.problem}{fix}".replace("\n", " ")) from None
    if fmt == "json":
        click.echo(json.dumps(to_json(report), indent=2))
    elif fmt == "markdown":
        click.echo(render_markdown(report))
    else:
        click.echo(render_text(report))
