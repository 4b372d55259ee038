"""The requests a simulation replays: arrival time, prompt and output lengths, and the prompt's
prefix as a chain of block hashes (equal leading hashes = a shared prefix the cache can reuse).

Sources: a trace in the formats ``ttft bench --trace`` reads (Mooncake lines carry their own
``hash_ids``; JSONL request bodies are counted with a tokenizer, or ~4 characters a token, and
hashed in blocks), re-timed by a Poisson process at another rate if asked; or a synthetic mix.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ttft.core.errors import TtftError
from ttft.workload.trace import Trace, TraceRequest

NS_PER_S = 1_000_000_000
CHARS_PER_TOKEN = 4  # the estimate when no tokenizer is given


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One request: ``blocks`` hashes the prompt in ``block_tokens``-token blocks, each hash
    covering everything before it, so two prompts share a prefix as long as their hashes match."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    blocks: tuple[int, ...] = ()
    block_tokens: int = 512
    index: int = 0
    # The key a real router hashed this request's prompt to (a validation through ttft gateway
    # sets it, so the simulated ring sends it where the gateway did); None: from ``blocks``.
    route_key: int | None = None
    # The prompt length a real gateway estimated for it (from the body's bytes), which picks its
    # lane (a validation through ttft gateway sets it); None: ``prompt_tokens``.
    lane_tokens: int | None = None

    def shared_prefix(self, other_blocks: Sequence[int]) -> int:
        """Prompt tokens of this request covered by the leading blocks it shares.

        Block hashes are chained (each covers everything before it), so two chains agree up to
        some block and differ from there on: the length of that run is found by bisection, a
        few comparisons however long the prompt (the simulator asks this for every idle slot
        and cached prompt at every admission)."""
        mine = self.blocks
        n = min(len(mine), len(other_blocks))
        if n == 0 or mine[0] != other_blocks[0]:
            return 0
        if mine[n - 1] == other_blocks[n - 1]:
            same = n
        else:
            same, differs = 1, n - 1  # mine[same - 1] agrees, mine[differs] does not
            while differs - same > 0:
                mid = (same + differs + 1) // 2
                if mine[mid - 1] == other_blocks[mid - 1]:
                    same = mid
                else:
                    differs = mid - 1
        return min(self.prompt_tokens, same * self.block_tokens)


_MASK = (1 << 64) - 1


def _chain(parts: Sequence[object]) -> tuple[int, ...]:
    """Chained 64-bit hashes: each stands for every part up to it. Text goes through blake2b;
    numbers through Python's tuple hash (fast, and the same in every process for ints)."""
    out: list[int] = []
    h = 0
    for part in parts:
        if isinstance(part, str):
            data = h.to_bytes(8, "big") + part.encode("utf-8", "surrogatepass")
            h = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")
        else:
            h = hash((h, part)) & _MASK
        out.append(h)
    return tuple(out)


def _body_text(request: TraceRequest) -> str:
    body = request.body or {}
    if isinstance(body.get("prompt"), str):
        return str(body["prompt"])
    return json.dumps(body.get("messages", []), ensure_ascii=False, sort_keys=True)


def from_trace(
    trace: Trace,
    *,
    block_tokens: int,
    max_tokens: int | None = None,
    count_tokens: Callable[[str], list[int]] | None = None,
    default_output: int = 64,
) -> list[SimRequest]:
    """The trace's requests in arrival order. Mooncake ``hash_ids`` are chained so a hash stands
    for its whole prefix; JSONL bodies are tokenized (or estimated) and hashed per block."""
    out: list[SimRequest] = []
    for index, request in enumerate(trace.requests):
        output = request.output_length if request.output_length is not None else default_output
        if max_tokens is not None:
            output = min(output, max_tokens)
        output = max(1, output)
        if trace.format == "mooncake":
            assert request.input_length is not None
            prompt = request.input_length
            ids = request.hash_ids
            last = prompt - block_tokens * (len(ids) - 1)
            blocks = _chain(
                [(h, block_tokens) for h in ids[:-1]] + [(ids[-1], last)] if ids else []
            )
        else:
            text = _body_text(request)
            if count_tokens is not None:
                tokens = count_tokens(text)
                prompt = max(1, len(tokens))
                blocks = _chain(
                    [
                        tuple(tokens[i : i + block_tokens])
                        for i in range(0, len(tokens), block_tokens)
                    ]
                )
            else:
                prompt = max(1, len(text) // CHARS_PER_TOKEN)
                unit = block_tokens * CHARS_PER_TOKEN
                blocks = _chain([text[i : i + unit] for i in range(0, len(text), unit)])
        out.append(
            SimRequest(request.offset_ns / NS_PER_S, prompt, output, blocks, block_tokens, index)
        )
    return out


def poisson_times(requests: Sequence[SimRequest], rate: float, seed: int) -> list[SimRequest]:
    """The same requests in the same order, arriving as a Poisson process at ``rate`` per s."""
    if not rate > 0:
        raise TtftError(f"--rate must be above 0 requests/s, not {rate}")
    rng = random.Random(seed)
    t = 0.0
    out: list[SimRequest] = []
    for request in requests:
        out.append(replace(request, arrival_s=t))
        t += rng.expovariate(rate)
    return out


def scaled_times(requests: Sequence[SimRequest], speed: float) -> list[SimRequest]:
    """``speed`` times as fast as recorded (``ttft bench --speed``)."""
    if not speed > 0:
        raise TtftError(f"--speed must be above 0, not {speed}")
    return [replace(r, arrival_s=r.arrival_s / speed) for r in requests]


def synthetic(
    count: int,
    *,
    prompt_tokens: int,
    output_tokens: int,
    shared_prefix_tokens: int = 0,
    prefix_groups: int = 1,
    block_tokens: int = 64,
    seed: int = 0,
) -> list[SimRequest]:
    """``count`` requests of fixed lengths (times 0: give them a rate with ``poisson_times``);
    the first ``shared_prefix_tokens`` of each prompt come from one of ``prefix_groups``
    prefixes, the rest is unique."""
    if count < 1 or prompt_tokens < 1 or output_tokens < 1:
        raise TtftError("a synthetic workload needs count, prompt and output tokens of at least 1")
    if not 0 <= shared_prefix_tokens <= prompt_tokens:
        raise TtftError(
            f"the shared prefix ({shared_prefix_tokens}) must be within the prompt "
            f"({prompt_tokens} tokens)"
        )
    rng = random.Random(seed)
    n_blocks = -(-prompt_tokens // block_tokens)
    shared = shared_prefix_tokens // block_tokens
    out: list[SimRequest] = []
    for index in range(count):
        group = rng.randrange(max(1, prefix_groups))
        parts: list[object] = [(0, group, b) for b in range(shared)]
        parts += [(1, index, b) for b in range(shared, n_blocks)]
        out.append(
            SimRequest(0.0, prompt_tokens, output_tokens, _chain(parts), block_tokens, index)
        )
    return out
