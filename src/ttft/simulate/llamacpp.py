"""llama.cpp's llama-server scheduler as a discrete-event model.

What it does, step by step (``update_slots`` in the server):

- ``slots`` slots (``-np``); a request waits (``requests_deferred``) until one is idle. An idle
  slot is chosen by prompt similarity (the slot whose cached tokens share the longest prefix,
  when that covers at least ``SIMILARITY`` of the prompt), otherwise the least recently used.
- Each step builds one shared batch of at most ``batch_tokens`` tokens (``-b``): one token for
  every slot that is generating, then the prompts of the slots still prefilling, slot by slot
  in slot order, as many tokens as fit. A prompt longer than the room left continues in the
  next step.
- A slot keeps the KV of its last request; a new prompt that shares its leading tokens reuses
  them (``cache_n``) and computes only the rest. A slot's prompt goes to the host-memory prompt
  cache (``--cache-ram``, on by default in current builds, LRU) when the slot is taken by a
  prompt that keeps less than half of it (``f_keep < 0.5``), and, with ``--cache-idle-slots``
  (on by default), when a task starts in another slot while it is idle; a new request's longest
  cached prefix is moved into its slot when that beats the slot's own (``host_cache.py``). So
  a prefix that lives only in a busy slot cannot help a request in another slot: measured on
  the embedded engine, two concurrent requests with one 640-token prefix both compute it when
  its only copy was the slot the first one took, and the second hits once the prefix has been
  saved.
- After the step, a slot whose prompt is complete samples its first token (the client sees it
  then); a generating slot samples its next one, and a slot that reached its output length is
  idle again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from ttft.simulate.engine import ReplicaSim, SimOutcome
from ttft.simulate.host_cache import PromptCache
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest

SIMILARITY = 0.1  # llama-server's --slot-prompt-similarity default
KEEP = 0.5  # a slot's prompt is saved to the host cache when its new one keeps less of it


@dataclass(slots=True)
class _Slot:
    index: int
    outcome: SimOutcome | None = None
    cache: tuple[int, ...] = ()  # block hashes of the prompt whose KV the slot holds
    cache_tokens: int = 0  # tokens in that KV (prompt and answer): f_keep's denominator
    last_used: float = -1.0
    context: int = 0  # tokens in the slot's KV for the running request
    to_prefill: int = 0
    to_generate: int = 0
    chunk: int = 0  # prompt tokens in the running step
    restored: int = 0  # prompt tokens reused from a cache (the slot's or the host's), charged once
    decoding: bool = False  # a token of this slot is in the running step


class LlamaCppReplica(ReplicaSim):
    def __init__(self, cost: CostModel, settings: EngineSettings, index: int = 0) -> None:
        super().__init__(cost, settings, index)
        self.slots = [_Slot(i) for i in range(settings.slots)]
        self.waiting: deque[SimOutcome] = deque()
        self.host = PromptCache(settings.host_cache_tokens)  # --cache-ram
        self.busy = 0
        self.repeat = 1  # steps the planned batch stands for (see _plan_step)
        self._run = (0.0, 0.0)  # a fast-forwarded run: one step's time, its growth per step

    @property
    def load(self) -> int:
        return self.busy + len(self.waiting)

    @property
    def has_free_slot(self) -> bool:
        return self.busy + len(self.waiting) < len(self.slots)

    def _enqueue(self, outcome: SimOutcome) -> None:
        limit = self.settings.ctx_per_slot
        need = outcome.request.prompt_tokens + outcome.request.output_tokens
        if limit is not None and outcome.request.prompt_tokens >= limit:
            outcome.refused = f"prompt of {outcome.request.prompt_tokens} tokens > slot context"
            return
        if limit is not None and need > limit:
            # llama-server stops generating when the slot's context is full.
            outcome.request = _capped(outcome, limit - outcome.request.prompt_tokens)
        self.waiting.append(outcome)

    def _pick_slot(self, outcome: SimOutcome) -> _Slot | None:
        idle = [s for s in self.slots if s.outcome is None]
        if not idle:
            return None
        if self.settings.prefix_cache:
            request = outcome.request
            best = max(idle, key=lambda s: (request.shared_prefix(s.cache), -s.index))
            shared = request.shared_prefix(best.cache)
            if shared > 0 and shared >= SIMILARITY * request.prompt_tokens:
                return best
        return min(idle, key=lambda s: (s.last_used, s.index))

    def _admit(self, now: float) -> None:
        while self.waiting:
            slot = self._pick_slot(self.waiting[0])
            if slot is None:
                return
            outcome = self.waiting.popleft()
            request = outcome.request
            cached = 0
            if self.settings.prefix_cache:
                own = request.shared_prefix(slot.cache)
                if slot.cache and own < KEEP * slot.cache_tokens:
                    self.host.save(slot.cache, slot.cache_tokens)  # about to be overwritten
                for other in self.slots:  # --cache-idle-slots (on by default)
                    if other is not slot and other.outcome is None and other.cache:
                        self.host.save(other.cache, other.cache_tokens)
                entry, kept = self.host.best(request)
                # at least one prompt token is always computed, to produce the first logits
                cached = min(max(own, kept), request.prompt_tokens - 1)
                if entry is not None and kept > own:
                    self.host.take(entry)  # moved into the slot
            # The calibration fits cached_token_s on hits in the prompt's own slot (its cached
            # phase sends a prefix twice), so every hit is charged it, restored or not.
            slot.restored = cached
            outcome.admitted_s = now
            outcome.cached_tokens = cached
            slot.outcome = outcome
            slot.cache = request.blocks
            slot.cache_tokens = request.prompt_tokens + request.output_tokens
            slot.context = cached
            slot.to_prefill = request.prompt_tokens - cached
            slot.to_generate = request.output_tokens
            self.busy += 1

    def _plan_step(self, now: float) -> float | None:
        self._admit(now)
        room = self.settings.batch_tokens
        decode_seqs = 0
        attention = 0.0
        prefill = restored = 0
        for slot in self.slots:
            slot.chunk = 0
            slot.decoding = slot.outcome is not None and slot.to_prefill == 0
            if slot.decoding:
                decode_seqs += 1
                attention += slot.context
                room -= 1
        for slot in self.slots:
            if slot.outcome is None or slot.to_prefill == 0 or room <= 0:
                continue
            chunk = min(slot.to_prefill, room)
            slot.chunk = chunk
            room -= chunk
            prefill += chunk
            restored += slot.restored
            slot.restored = 0
            attention += chunk * (slot.context + chunk / 2)
        if decode_seqs == 0 and prefill == 0:
            return None
        self.repeat = 1
        one = self.cost.step_s(prefill, decode_seqs, attention / 1000.0, restored)
        if prefill == 0:
            # Only decoding, and nobody waits for a free slot: the next steps are alike
            # (context +1 each) until the first slot is done or a request arrives (which cuts
            # the run short: _interrupt), so they run as one.
            self.repeat = min(s.to_generate for s in self.slots if s.outcome is not None)
            self._run = (one, self.cost.attention_s * decode_seqs / 1000.0)
            self.steps += self.repeat - 1
        return self._run_s(self.repeat) if self.repeat > 1 else one

    def _run_s(self, k: int) -> float:
        one, growth = self._run
        return k * one + growth * k * (k - 1) / 2

    def _interrupt(self, now: float) -> float | None:
        if self.repeat <= 1:
            return None
        done = 1
        while done < self.repeat and self.step_start + self._run_s(done) * self.speed < now:
            done += 1
        if done >= self.repeat:
            return None
        self.busy_s -= (self._run_s(self.repeat) - self._run_s(done)) * self.speed
        self.steps -= self.repeat - done
        self.repeat = done
        self.step_end = self.step_start + self._run_s(done) * self.speed
        return self.step_end

    def _apply_step(self, end: float) -> None:
        for slot in self.slots:
            outcome = slot.outcome
            if outcome is None:
                continue
            if slot.chunk:
                slot.to_prefill -= slot.chunk
                slot.context += slot.chunk
                slot.chunk = 0
                if slot.to_prefill == 0:
                    outcome.first_token_s = end
                    slot.to_generate -= 1
                    slot.context += 1
            elif slot.decoding:
                slot.to_generate -= self.repeat
                slot.context += self.repeat
            slot.decoding = False
            if slot.to_prefill == 0 and slot.to_generate <= 0:
                outcome.done_s = end
                self.finished.append(outcome)
                slot.outcome = None
                slot.last_used = end
                self.busy -= 1


def _capped(outcome: SimOutcome, output: int) -> SimRequest:
    return replace(outcome.request, output_tokens=max(1, output))
