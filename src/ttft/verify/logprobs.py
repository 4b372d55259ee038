"""Token log-probabilities as engines stream them, read into one shape: ``TokenProbs`` per token.

Three shapes reach us (pure parsing, no I/O):

- llama-server's native ``POST /completion`` with ``n_probs``: each event carries
  ``completion_probabilities: [{id, token, logprob, top_logprobs: [{id, token, logprob}]}]``.
- OpenAI chat (``logprobs: true``, ``top_logprobs: k``), and llama-server's ``/v1/completions``:
  ``choices[0].logprobs.content: [{token, logprob, bytes, top_logprobs: [{token, logprob,
  bytes}]}]``; llama-server adds ``id`` to each, vLLM and SGLang do not.
- OpenAI legacy completions (``logprobs: k``), as vLLM and SGLang answer ``/v1/completions``:
  ``choices[0].logprobs: {tokens: [str], token_logprobs: [float], top_logprobs: [{str: float}],
  text_offset: [int]}``.

Ids are kept where every entry has one, so a comparison can use them; the token text is kept
always, the key a comparison falls back on when one side gives no ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenProbs:
    """One generated token: its id (None where the engine gives none), text and top k."""

    id: int | None
    text: str
    top_ids: Mapping[int, float] | None  # token id -> log-probability; None without ids
    top_texts: Mapping[str, float]  # token text -> log-probability


def _by_text(entries: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in entries:
        text = str(c.get("token", ""))
        # Two ids may decode to one text (byte pieces): keep the likelier, as a merge of the two
        # would claim mass for a token the engine never ranked.
        out[text] = max(out.get(text, -1e30), float(c["logprob"]))
    return out


def _entry(item: Mapping[str, Any]) -> TokenProbs:
    top = [c for c in item.get("top_logprobs") or [] if isinstance(c, Mapping)]
    has_ids = "id" in item and all("id" in c for c in top)
    return TokenProbs(
        id=int(item["id"]) if "id" in item else None,
        text=str(item.get("token", "")),
        top_ids={int(c["id"]): float(c["logprob"]) for c in top} if has_ids else None,
        top_texts=_by_text(top),
    )


def native_probs(event: Mapping[str, Any]) -> list[TokenProbs]:
    """llama-server ``/completion`` event: its ``completion_probabilities`` (may be empty)."""
    probs = event.get("completion_probabilities")
    if not isinstance(probs, list):
        return []
    return [_entry(p) for p in probs if isinstance(p, Mapping)]


def openai_probs(choice: Mapping[str, Any]) -> list[TokenProbs]:
    """One OpenAI-style choice (a streamed chunk's or a whole answer's), either shape."""
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping):
        return []
    content = lp.get("content")
    if isinstance(content, list):
        return [_entry(p) for p in content if isinstance(p, Mapping)]
    tokens = lp.get("tokens")
    tops = lp.get("top_logprobs")
    if not isinstance(tokens, list) or not isinstance(tops, list):
        return []
    out = []
    for text, top in zip(tokens, tops, strict=False):
        ranked = {str(t): float(v) for t, v in top.items()} if isinstance(top, Mapping) else {}
        out.append(TokenProbs(None, str(text), None, ranked))
    return out
