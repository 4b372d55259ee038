"""Frontend cost: Jinja render vs pre-rendered join, Python vs Rust tokenization, per request.

The measurement of ``ttft tune frontend`` (``ttft.tune.frontend.measure_frontend``) on three sets
of requests, with the template the embedded llama-server reports in GET /props (llama.cpp's
ChatML fallback: the embedded Gemma 3 GGUF carries none) and both tokenizers built from the
embedded GGUF's vocabulary:

- ``example``: examples/requests.jsonl as it is (9 requests, ~400 tokens, one of ~1,500);
- ``long``: 8 requests of ~2,400 tokens, one shared ~2,000-token system prompt and a ~400-token
  user message each (seeded random words from the example log);
- ``long+tools``: ~2,500 tokens, 8 tool schemas (~1,900 tokens) and a short system prompt,
  rendered by a template written here that prints the tools with ``tojson(indent=2)`` in the
  system turn, as many Hugging Face templates do.

Each stage is timed ``--repeats`` times per request after one cold call; the table gives the
median over requests of each request's median, and the ratios are sums of per-request medians
(alternative / anchor, the anchor being the Python tokenizer and the full render of the same
run). The server's /tokenize round trip is timed too.

    python benchmarks/frontend_cost.py
    python benchmarks/frontend_cost.py --repeats 40
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from ttft.core.target import Target
from ttft.engines.control import ControlClient, ServerTokenizer
from ttft.engines.llamacpp.embedded import embedded_model_path, launch_embedded
from ttft.prompts.chat_template import ChatTemplate
from ttft.tune.frontend import measure_frontend
from ttft.tune.frontend_report import FrontendReport
from ttft.workload.gguf_tokenizer import GgufTokenizer, build_backend, load_vocab_and_merges
from ttft.workload.request_log import ChatRequest, load_request_log
from ttft.workload.spm_python import PythonBpe

ROOT = Path(__file__).resolve().parents[1]

# A template of this benchmark's own, in the common shape: tools as JSON in the system turn.
TOOLS_TEMPLATE = """{{ bos_token }}
{%- for message in messages %}
{%- if loop.first and message.role == 'system' %}
<|im_start|>system
{{ message.content }}
{%- if tools %}

You may call these tools:
{%- for tool in tools %}
{{ tool | tojson(indent=2) }}
{%- endfor %}
{%- endif %}<|im_end|>
{% else %}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def _words(rng: random.Random, vocabulary: list[str], n: int) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(n))


def _tool(i: int, rng: random.Random, vocabulary: list[str]) -> dict[str, Any]:
    props = {
        f"arg_{k}": {
            "type": rng.choice(["string", "integer"]),
            "description": _words(rng, vocabulary, 4),
        }
        for k in range(5)
    }
    return {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": _words(rng, vocabulary, 16),
            "parameters": {"type": "object", "properties": props, "required": ["arg_0"]},
        },
    }


def long_requests(tools: bool, n: int = 8, seed: int = 0) -> list[ChatRequest]:
    """~2,400-token requests sharing one ~2,000-token system prompt (words from the example log)."""
    text = (ROOT / "examples" / "requests.jsonl").read_text()
    vocabulary = sorted({w for w in text.split() if w.isalpha()})
    rng = random.Random(seed)
    # Sized for ~2,400 tokens a request either way: the tool schemas take ~1,900 of them.
    system = {"role": "system", "content": _words(rng, vocabulary, 130 if tools else 2000)}
    schemas = [_tool(i, rng, vocabulary) for i in range(8)] if tools else None
    return [
        ChatRequest(
            [system, {"role": "user", "content": _words(rng, vocabulary, 350)}],
            tools=schemas,
            file="long",
            line=i + 1,
        )
        for i in range(n)
    ]


def _row(name: str, report: FrontendReport) -> str:
    def p50(stage: str) -> float:
        found = report.stage(stage)
        return found.p50_ms if found else float("nan")

    def ratio(anchor: str, alt: str) -> float:
        found = report.saving(anchor, alt)
        return found.ratio if found else float("nan")

    tokens = sorted(r.tokens for r in report.requests)[len(report.requests) // 2]
    return (
        f"{name:<11} {tokens:>6} {p50('render_full'):>8.3f} {p50('render_prerendered'):>8.3f} "
        f"{ratio('render_full', 'render_prerendered'):>6.2f} {p50('tokenize_python'):>8.3f} "
        f"{p50('tokenize_rust'):>8.3f} {ratio('tokenize_python', 'tokenize_rust'):>6.2f} "
        f"{p50('tokenize_server'):>8.3f} {len(report.mismatches):>4}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    vocab, merges = load_vocab_and_merges(embedded_model_path())
    python_tok = GgufTokenizer(vocab, PythonBpe(vocab, merges))
    rust_tok = GgufTokenizer(vocab, build_backend(vocab, merges))
    reports: dict[str, FrontendReport] = {}
    with launch_embedded(ctx_size=8192, parallel=1) as engine:
        target = Target(engine.base_url)
        props = ControlClient(target).props()
        special = {k: str(props[k]) for k in ("bos_token", "eos_token") if k in props}
        fallback = ChatTemplate(str(props["chat_template"]), "GET /props", special)
        tools_template = ChatTemplate(TOOLS_TEMPLATE, "benchmark tools template", special)
        cases = [
            ("example", load_request_log(ROOT / "examples" / "requests.jsonl"), fallback),
            ("long", long_requests(tools=False), fallback),
            ("long+tools", long_requests(tools=True), tools_template),
        ]
        for name, requests, template in cases:
            reports[name] = measure_frontend(
                requests,
                template,
                python_tokenizer=python_tok,
                rust_tokenizer=rust_tok,
                server_tokenizer=ServerTokenizer(target),
                repeats=args.repeats,
            )
    print(f"frontend cost, {args.repeats} warm runs per request and stage (ms, p50 over requests)")
    print(
        f"{'case':<11} {'tokens':>6} {'render':>8} {'cached':>8} {'ratio':>6} "
        f"{'python':>8} {'rust':>8} {'ratio':>6} {'server':>8} {'mism':>4}"
    )
    for name, report in reports.items():
        print(_row(name, report))
    for name, report in reports.items():
        for warning in report.warnings:
            print(f"warning ({name}): {warning}", file=sys.stderr)
    summary = {
        name: {s.stage: round(s.p50_ms, 4) for s in report.stages}
        for name, report in reports.items()
    }
    print(json.dumps(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
