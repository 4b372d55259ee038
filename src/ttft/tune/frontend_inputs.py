"""``ttft tune frontend``'s inputs, found in order, and the measurement run on them.

Sources, in order: the template from --chat-template, else from the server's ``GET /props``
(--url, or the embedded llama-server started for it and stopped after: that is llama.cpp's
built-in fallback when the GGUF carries no template). The tokenizers from --model, else from the
served GGUF when /props names a file on this machine, else from the embedded model's GGUF.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import PROPS, ControlClient
from ttft.engines.llamacpp.on_demand import EmbeddedSize, target_or_embedded
from ttft.prompts.chat_template import ChatTemplate
from ttft.prompts.sources import load_template, template_from_props
from ttft.tune.frontend_report import FrontendReport
from ttft.workload.tokenizer import Tokenizer


@dataclass
class _Server:
    target: Target
    props: dict[str, Any]


@contextlib.contextmanager
def _server(
    url: str | None, model: Path | None, needed: bool, announce: Callable[[str], None] | None
) -> Iterator[_Server | None]:
    """The server to read /props and time /tokenize on: --url, or the embedded one if needed."""
    if url is None and not needed:
        yield None
        return

    def starting(size: EmbeddedSize) -> None:
        if announce is not None:
            announce("starting the embedded engine (llama-server) for its chat template ...")

    given = Target(url) if url is not None else None
    size = EmbeddedSize(4096, slots=1, model_path=model)
    with target_or_embedded(given, size, complete=False, on_start=starting) as served:
        # send, not props(): an unreachable --url must say so, not look like a server without
        # a template.
        yield _Server(served.target, ControlClient(served.target).send(PROPS))


def _template(path: Path | None, server: _Server | None) -> ChatTemplate:
    if path is not None:
        return load_template(path)
    assert server is not None
    template = template_from_props(server.props, server.target.root)
    if template is None:
        raise TtftError(
            f"{server.target.root}/props gives no chat template (not a llama-server?)",
            "give the template with --chat-template (a .jinja, tokenizer_config.json or .gguf)",
        )
    return template


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
    announce: Callable[[str], None] | None = None,
) -> FrontendReport:
    """The whole flow, with every input problem as a TtftError; ``announce`` is told before
    an engine is started for its template."""
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
    with _server(url, model, chat_template is None, announce) as server:
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
