"""The workload a what-if runs: a trace (re-timed at a rate if asked) or a synthetic mix, as
simulated requests per replication seed, and as real requests for ``--validate``.

The validation sends exactly the arrivals of replication 0 (``Replay`` of its offsets), so the
prediction and the measurement see the same requests at the same times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ttft.core.errors import TtftError
from ttft.load.trace_plan import body_item
from ttft.simulate.requests import (
    SimRequest,
    from_trace,
    poisson_times,
    scaled_times,
    synthetic,
)
from ttft.workload.arrival import Replay
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.mooncake import mooncake_items
from ttft.workload.requests import ApiStyle, WorkItem, completion_body
from ttft.workload.tokenizer import Tokenizer
from ttft.workload.trace import Trace, TraceSpec, read_trace

NS_PER_S = 1_000_000_000
SYNTHETIC_BLOCK = 16  # prefix-sharing granularity of synthetic prompts, in tokens


@dataclass(frozen=True)
class WorkloadSource:
    """Either ``trace`` (with an optional Poisson ``rate`` replacing its times, or ``speed``) or
    a synthetic mix of ``count`` requests at ``rate``."""

    trace: TraceSpec | None = None
    rate: float | None = None
    count: int = 200
    prompt_tokens: int = 512
    output_tokens: int = 32
    shared_prefix_tokens: int = 0
    prefix_groups: int = 1
    api: ApiStyle = "completions"

    def check(self) -> None:
        if self.trace is None and self.rate is None:
            raise TtftError(
                "no workload: give --trace FILE, or --rate R for a synthetic Poisson workload",
                "e.g. ttft simulate run --calibration cal.json --rate 2 --prompt-tokens 600",
            )

    def _trace(self) -> Trace:
        assert self.trace is not None
        spec = self.trace
        return read_trace(spec.path, spec.format, block_size=spec.block_size, limit=spec.limit)

    def requests(self, seed: int, tokenizer: Tokenizer | None = None) -> list[SimRequest]:
        self.check()
        if self.trace is not None:
            trace = self._trace()
            count = tokenizer.encode if tokenizer is not None else None
            block = self.trace.block_size if trace.format == "mooncake" else SYNTHETIC_BLOCK * 4
            reqs = from_trace(
                trace, block_tokens=block, max_tokens=self.trace.max_tokens, count_tokens=count
            )
            if self.rate is not None:
                return poisson_times(reqs, self.rate, seed)
            return scaled_times(reqs, self.trace.speed)
        assert self.rate is not None
        reqs = synthetic(
            self.count,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            shared_prefix_tokens=self.shared_prefix_tokens,
            prefix_groups=self.prefix_groups,
            block_tokens=SYNTHETIC_BLOCK,
            seed=seed,
        )
        return poisson_times(reqs, self.rate, seed)

    def real(
        self, requests: Sequence[SimRequest], tokenizer: Tokenizer, seed: str = "sim"
    ) -> tuple[list[WorkItem], Replay]:
        """The same requests as real bodies, and their arrival schedule."""
        offsets = tuple(round(r.arrival_s * NS_PER_S) for r in requests)
        if self.trace is not None:
            trace = self._trace()
            if trace.format == "mooncake":
                items, _notes = mooncake_items(
                    trace.requests,
                    tokenizer,
                    block_size=self.trace.block_size,
                    api=self.api,
                    max_tokens=self.trace.max_tokens,
                    seed=seed,
                )
            else:
                items = [body_item(r, self.trace.max_tokens) for r in trace.requests]
            return [_exact(i) for i in items], Replay(offsets)
        prefixes: dict[int, str] = {}
        items = []
        for r in requests:
            group = _group_of(r)
            head = ""
            if self.shared_prefix_tokens:
                if group not in prefixes:
                    prefixes[group] = text_of_tokens(
                        tokenizer, self.shared_prefix_tokens, f"{seed}/prefix/{group}"
                    )
                head = prefixes[group]
            rest = self.prompt_tokens - self.shared_prefix_tokens
            tail = text_of_tokens(tokenizer, rest, f"{seed}/{r.index}/{r.arrival_s}", lead=" ")
            body = completion_body(head + tail, r.output_tokens)
            body["temperature"] = 0
            items.append(_exact(WorkItem(body, "completions", "sim", r.prompt_tokens)))
        return items, Replay(offsets)


def _exact(item: WorkItem) -> WorkItem:
    """Every request generates exactly its output length (llama-server's ``ignore_eos``)."""
    return replace(item, body={**item.body, "ignore_eos": True})


def _group_of(request: SimRequest) -> int:
    return request.blocks[0] if request.blocks else request.index
