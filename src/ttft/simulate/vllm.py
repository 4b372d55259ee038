"""vLLM's scheduler (V1) as a discrete-event model.

Each step has a token budget (``--max-num-batched-tokens``, ``batch_tokens``):

- running requests first, in admission order: one token each when decoding, the next chunk of
  their prompt when prefilling (chunked prefill; without it a prompt must fit whole);
- then waiting requests, oldest first, while fewer than ``--max-num-seqs`` (``slots``) run and
  budget is left: the prompt's leading blocks found in the prefix cache are not computed again;
- KV lives in ``kv_blocks`` blocks of ``block_tokens`` tokens. A running request that needs a
  block when none is free (after evicting cached blocks nobody uses, least recently used first)
  preempts the newest running request, whose blocks are freed and whose prompt (and the tokens it
  generated) are computed again when it is re-admitted (recompute preemption).

A run of decode-only steps (every running request decoding, none that could be admitted, KV
blocks enough without evicting) is simulated as one event whose step ends are accumulated one
by one, exactly as step by step; an arrival cuts it at the first step boundary after it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from ttft.simulate.decode_runs import DecodeRuns
from ttft.simulate.engine import SimOutcome
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest


@dataclass(slots=True)
class _Seq:
    outcome: SimOutcome
    computed: int = 0  # tokens whose KV exists (cached prefix + computed prompt + generated)
    target: int = 0  # tokens to compute before the next token is sampled (prompt + generated)
    generated: int = 0
    blocks: int = 0  # KV blocks held
    shared: tuple[int, ...] = ()  # prefix-cache entries this sequence holds a reference to
    covered: int = 0  # tokens whose KV lives in those entries (not in ``blocks``)
    chunk: int = 0  # tokens in the running step


def _blocks(tokens: int, size: int) -> int:
    return -(-tokens // size)


class VllmReplica(DecodeRuns):
    def __init__(self, cost: CostModel, settings: EngineSettings, index: int = 0) -> None:
        super().__init__(cost, settings, index)
        self.waiting: deque[_Seq] = deque()
        self.running: list[_Seq] = []
        total = settings.kv_blocks
        self.free = total if total is not None else 1 << 60
        # prefix cache: chained block hash -> KV blocks it holds, and who uses it
        self.refs: dict[int, int] = {}
        self.evictable: OrderedDict[int, int] = OrderedDict()
        self.entry_blocks: dict[int, int] = {}

    @property
    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    @property
    def has_free_slot(self) -> bool:
        return self.load < self.settings.slots

    def _enqueue(self, outcome: SimOutcome) -> None:
        request = outcome.request
        cap = self.settings.kv_blocks
        if cap is not None and _blocks(request.prompt_tokens + 1, self.settings.block_tokens) > cap:
            outcome.refused = "prompt larger than the whole KV cache"
            return
        self.waiting.append(_Seq(outcome, target=request.prompt_tokens))

    # -- KV blocks ---------------------------------------------------------------------------
    def _take(self, n: int) -> bool:
        while self.free < n and self.evictable:
            key, size = self.evictable.popitem(last=False)
            del self.entry_blocks[key]
            self.free += size
        if self.free < n:
            return False
        self.free -= n
        return True

    def _grow(self, seq: _Seq, tokens: int) -> bool:
        need = _blocks(max(0, tokens - seq.covered), self.settings.block_tokens) - seq.blocks
        if need <= 0:
            return True
        if not self._take(need):
            return False
        seq.blocks += need
        return True

    def _release(self, seq: _Seq) -> None:
        self.free += seq.blocks
        seq.blocks = 0
        for key in seq.shared:
            self.refs[key] -= 1
            if self.refs[key] == 0:
                del self.refs[key]
                self.evictable[key] = self.entry_blocks[key]
        seq.shared = ()
        seq.covered = 0

    def _hit(self, seq: _Seq) -> int:
        """Reference the cached leading blocks of ``seq``'s prompt; tokens they cover."""
        if not self.settings.prefix_cache:
            return 0
        request = seq.outcome.request
        keys, entry_tokens, _ = self._entries(request)
        held: list[int] = []
        for key in keys:
            if key in self.refs or key in self.evictable:
                held.append(key)
            else:
                break
        covered = min(len(held) * entry_tokens, request.prompt_tokens - 1)
        if covered <= 0:
            return 0
        for key in held:
            if key in self.evictable:
                self.evictable.pop(key)
                self.refs[key] = 0
            self.refs[key] += 1
        seq.shared = tuple(held)
        seq.covered = len(held) * entry_tokens
        return covered

    def _entries(self, request: SimRequest) -> tuple[Sequence[int], int, int]:
        """The prefix cache's entries for ``request``: their keys, the tokens each covers and
        the KV blocks each holds. vLLM hashes whole KV blocks: where a request's blocks are
        smaller (16-token synthetic blocks against the CPU build's 128-token KV blocks), each
        KV block is one entry keyed by the chained hash of the last request block it ends on
        (that hash stands for the whole prefix); where they are larger (a Mooncake trace's
        512-token blocks), an entry spans several KV blocks."""
        size = self.settings.block_tokens
        mine = request.block_tokens
        if mine >= size:
            return request.blocks, mine, _blocks(mine, size)
        group = max(1, size // mine)
        return request.blocks[group - 1 :: group], group * mine, 1

    def _publish(self, seq: _Seq) -> None:
        """A finished prompt's full blocks become cache entries (moved out of the sequence)."""
        if not self.settings.prefix_cache:
            return
        request = seq.outcome.request
        keys, entry_tokens, per = self._entries(request)
        full = min(len(keys), request.prompt_tokens // entry_tokens)
        known = set(seq.shared)
        added: list[int] = []
        for key in keys[:full]:
            if key in known:
                continue
            if key in self.refs or key in self.evictable or seq.blocks < per:
                continue
            seq.blocks -= per
            seq.covered += entry_tokens
            self.entry_blocks[key] = per
            self.refs[key] = 1
            added.append(key)
        seq.shared = seq.shared + tuple(added)

    # -- decode runs --------------------------------------------------------------------------
    def _decode_run(self) -> int:
        """Steps the next ones stay alike for (each running request decodes one token, nobody
        is admitted, no block is evicted or request preempted); 0 when the next is not one."""
        running = self.running
        if not running or len(running) > self.settings.batch_tokens:
            return 0
        if self.waiting and len(running) < self.settings.slots:
            return 0
        k = 1 << 62
        for seq in running:
            if seq.generated == 0 or seq.target - seq.computed != 1:
                return 0
            k = min(k, seq.outcome.request.output_tokens - seq.generated)
        if k < 2 or self._new_blocks(1) > self.free:
            return 0
        if self._new_blocks(k) <= self.free:
            return k
        low, high = 1, k  # need(low) fits, need(high) does not
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self._new_blocks(mid) <= self.free else (low, mid)
        return low

    def _new_blocks(self, steps: int) -> int:
        size = self.settings.block_tokens
        return sum(
            max(0, _blocks(max(0, s.computed + steps - s.covered), size) - s.blocks)
            for s in self.running
        )

    def _run_shape(self) -> tuple[int, int]:
        return len(self.running), sum(seq.computed for seq in self.running)

    def _retire_if_done(self, seq: _Seq, end: float) -> bool:
        """Finish ``seq`` at ``end`` once it has generated its whole answer (its blocks freed)."""
        if seq.generated < seq.outcome.request.output_tokens:
            return False
        seq.outcome.done_s = end
        self.finished.append(seq.outcome)
        self._release(seq)
        return True

    def _apply_run(self, end: float) -> None:
        still: list[_Seq] = []
        for seq in self.running:
            grown = self._grow(seq, seq.computed + self.repeat)
            assert grown, "a decode run is planned within the free blocks"
            seq.computed += self.repeat
            seq.generated += self.repeat
            seq.target = seq.computed + 1
            if not self._retire_if_done(seq, end):
                still.append(seq)
        self.running = still
        self.repeat = 1
        self.in_run = False

    # -- the step ----------------------------------------------------------------------------
    def _preempt(self) -> None:
        victim = self.running.pop()
        self._release(victim)
        victim.computed = 0
        victim.target = victim.outcome.request.prompt_tokens + victim.generated
        victim.outcome.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(victim)

    def _plan_step(self, now: float) -> float | None:
        budget = self.settings.batch_tokens
        chunked = self.settings.chunked_prefill
        prefill = decode = 0
        attention = 0.0
        preempted = False
        scheduled: list[_Seq] = []
        index = 0
        while index < len(self.running) and budget > 0:
            seq = self.running[index]
            remaining = seq.target - seq.computed
            chunk = max(1, min(remaining, budget))
            lost = False
            while not self._grow(seq, seq.computed + chunk):
                preempted = True
                lost = self.running[-1] is seq
                self._preempt()
                if lost:
                    break
            if lost:
                break
            seq.chunk = chunk
            scheduled.append(seq)
            budget -= chunk
            index += 1
        if not preempted:
            while self.waiting and len(self.running) < self.settings.slots and budget > 0:
                seq = self.waiting[0]
                hit = self._hit(seq) if seq.computed == 0 else 0
                seq.computed = max(seq.computed, hit)
                remaining = seq.target - seq.computed
                if not chunked and remaining > budget and scheduled:
                    self._release(seq)
                    seq.computed = 0
                    break
                chunk = min(remaining, budget) if chunked else remaining
                if not self._grow(seq, seq.computed + chunk):
                    self._release(seq)
                    seq.computed = 0
                    break
                self.waiting.popleft()
                if seq.outcome.admitted_s is None:
                    seq.outcome.admitted_s = now
                    seq.outcome.cached_tokens = hit
                self.running.append(seq)
                seq.chunk = chunk
                scheduled.append(seq)
                budget -= chunk
        for seq in scheduled:
            if seq.generated > 0 and seq.target - seq.computed == 1:
                decode += 1
                attention += seq.computed
            else:
                prefill += seq.chunk
                attention += seq.chunk * (seq.computed + seq.chunk / 2)
        if not scheduled:
            return None
        return self.cost.step_s(prefill, decode, attention / 1000.0)

    def _apply_step(self, end: float) -> None:
        if self.in_run:
            self._apply_run(end)
            return
        still: list[_Seq] = []
        for seq in self.running:
            if seq.chunk == 0:
                still.append(seq)
                continue
            seq.computed += seq.chunk
            seq.chunk = 0
            if seq.computed >= seq.target:
                if seq.generated == 0:
                    self._publish(seq)
                if seq.outcome.first_token_s is None:
                    seq.outcome.first_token_s = end
                seq.generated += 1
                seq.target = seq.computed + 1
            if not self._retire_if_done(seq, end):
                still.append(seq)
        self.running = still
