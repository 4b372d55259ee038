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
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from ttft.simulate.engine import ReplicaSim, SimOutcome
from ttft.simulate.model import CostModel, EngineSettings


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


class VllmReplica(ReplicaSim):
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
        held: list[int] = []
        for key in request.blocks:
            if key in self.refs or key in self.evictable:
                held.append(key)
            else:
                break
        covered = min(len(held) * request.block_tokens, request.prompt_tokens - 1)
        if covered <= 0:
            return 0
        for key in held:
            if key in self.evictable:
                self.evictable.pop(key)
                self.refs[key] = 0
            self.refs[key] += 1
        seq.shared = tuple(held)
        seq.covered = len(held) * request.block_tokens
        return covered

    def _publish(self, seq: _Seq) -> None:
        """A finished prompt's full blocks become cache entries (moved out of the sequence)."""
        if not self.settings.prefix_cache:
            return
        request = seq.outcome.request
        full = min(len(request.blocks), request.prompt_tokens // request.block_tokens)
        known = set(seq.shared)
        added: list[int] = []
        per = _blocks(request.block_tokens, self.settings.block_tokens)
        for key in request.blocks[:full]:
            if key in known:
                continue
            if key in self.refs or key in self.evictable or seq.blocks < per:
                continue
            seq.blocks -= per
            seq.covered += request.block_tokens
            self.entry_blocks[key] = per
            self.refs[key] = 1
            added.append(key)
        seq.shared = seq.shared + tuple(added)

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
            if seq.generated >= seq.outcome.request.output_tokens:
                seq.outcome.done_s = end
                self.finished.append(seq.outcome)
                self._release(seq)
                continue
            still.append(seq)
        self.running = still
