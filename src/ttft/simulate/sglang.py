"""SGLang's scheduler as a discrete-event model.

Every rule below was read in sgl-project/sglang's main branch (files newer than v0.5.3:
``python/sglang/srt/managers/scheduler.py`` at 0003215c, ``schedule_policy.py`` at 00550cd1,
``server_args.py`` at 001067ff; ``environ.py`` for the constants). Nothing here is validated
against a running SGLang (see docs/simulate.md, "Limits").

- A step is an extend (prefill) batch or a decode batch, not both (``get_next_batch_to_run``):
  a new extend batch is built first and, when it has any request, it runs and every decoding
  request waits; ``--enable-mixed-chunk`` (``mixed_chunk``) puts the decoding requests into it
  and takes their count off the budgets.
- The extend batch (``PrefillAdder``): the request whose prompt is being chunked first, its next
  chunk; then the waiting queue in order, stopping at the first request that does not fit, while
  running + admitted < ``--max-running-requests`` (``slots``). Budgets: ``--chunked-prefill-size``
  (``batch_tokens``) tokens per batch, of which one request may take a truncated chunk (then
  it is the chunked request of the next batches), ``--max-prefill-tokens``, and the KV the
  admitted requests may need: prompt + min(max_new_tokens, 4096) + one page each, against free +
  evictable KV minus, for each running request, its remaining tokens (clipped at 4096) times
  ``new_token_ratio``. A refusal for KV marks the batch full: no extend is tried until a
  running request finishes or is retracted. (On arrival an output is clipped to what the pool
  can hold beside its prompt: ``init_req_max_new_tokens``.)
- ``new_token_ratio`` starts at 0.7 (``SGLANG_INIT_NEW_TOKEN_RATIO`` x
  ``--schedule-conservativeness``, default 1.0, at most 1), drops by (0.7 - 0.7 x 0.14) / 600
  each decode step to 0.098. A decode step that finds too little KV (after evicting) retracts
  requests, fewest generated tokens first and then longest prompt, until 20 steps of the rest
  fit (``SGLANG_RETRACT_DECODE_STEPS``); the ratio becomes (generated + 20 x left) /
  (max_new + 1) over those left. A retracted request goes to the back of the queue and
  computes its prompt and generated tokens again, less what the radix cache still holds.
- The radix cache (``mem_cache/radix_cache.py`` at 006b0e3d): a computed prompt's KV stays in
  a tree; a new request reuses its longest cached prefix (at most prompt - 1 tokens, whole
  pages of ``--page-size``, default 1 token); nodes nobody uses are evicted least recently
  used first, leaves only. ``--disable-radix-cache`` (``prefix_cache`` False): no reuse.
- ``--schedule-policy lpm`` sorts the waiting queue by longest cached prefix before each extend
  batch, deferring requests that share 32+ tokens with an earlier waiting one whose prefix is not
  cached (in-batch prefix caching); with over 128 waiting it falls back to fcfs (the default).

Simplified: prefixes match in the request's hash blocks, not single tokens (``simulate/radix.py``);
a prompt enters the tree in whole blocks after each chunk (SGLang also caches a finished
request's output); the overlap scheduler, priority scheduling, LoRA, hierarchical cache and the
ignore-eos admission path are left out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ttft.simulate.decode_runs import DecodeRuns
from ttft.simulate.engine import SimOutcome
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.radix import Node, RadixPool

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO (times --schedule-conservativeness)
MIN_RATIO_FACTOR = 0.14  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
RATIO_DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
LPM_MAX_QUEUE = 128  # schedule_policy.py: lpm falls back to fcfs above this queue length
IN_BATCH_PREFIX_THRESHOLD = 32  # IN_BATCH_PREFIX_CACHING_{CHECK,DEPRIORITIZE}_THRESHOLD


@dataclass(slots=True)
class _Req:
    outcome: SimOutcome
    computed: int = 0  # tokens with KV (cached prefix + computed prompt + generated)
    target: int = 0  # tokens to compute before the next token is sampled
    generated: int = 0
    own: int = 0  # KV tokens this request allocated (page-rounded, not in the tree)
    path: tuple[Node, ...] = ()  # tree nodes it holds a lock on (its leading blocks)
    covered: int = 0  # tokens of those nodes
    chunk: int = 0  # tokens in the running step
    hit: int = 0  # cached tokens found at this admission
    max_new: int = 0  # tokens it generates (its output, clipped to what the pool can hold)


class SglangReplica(DecodeRuns):
    def __init__(self, cost: CostModel, settings: EngineSettings, index: int = 0) -> None:
        super().__init__(cost, settings, index)
        self.page = settings.block_tokens
        kv = settings.kv_blocks
        self.kv = RadixPool(kv * self.page if kv is not None else None, self.page)
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []
        self.chunked: _Req | None = None
        self.batch: list[_Req] = []  # the running extend batch (empty: a decode step)
        self.batch_full = False
        # scheduler.py: init = min(0.7 x conservativeness, 1), floor = min(init x 0.14, 1)
        self.init_ratio = min(INIT_NEW_TOKEN_RATIO * settings.schedule_conservativeness, 1.0)
        self.min_ratio = min(self.init_ratio * MIN_RATIO_FACTOR, 1.0)
        self.ratio_decay = (self.init_ratio - self.min_ratio) / RATIO_DECAY_STEPS
        self.ratio = self.init_ratio
        self.retractions = 0

    @property
    def load(self) -> int:
        parked = self.chunked is not None and not self.batch  # between two of its chunks
        return len(self.running) + len(self.waiting) + len(self.batch) + parked

    @property
    def has_free_slot(self) -> bool:
        return self.load < self.settings.slots

    def _enqueue(self, outcome: SimOutcome) -> None:
        prompt = outcome.request.prompt_tokens
        max_new = outcome.request.output_tokens
        if self.kv.capacity is not None:
            # scheduler.py init_req_max_new_tokens: prompt + output + a page must fit the pool
            room = self.kv.capacity - self.kv.ceil(prompt) - self.page - 1
            if room < 1:
                outcome.refused = "prompt larger than the whole KV cache"
                return
            max_new = min(max_new, room)
        self.waiting.append(_Req(outcome, target=prompt, max_new=max_new))

    # -- KV ---------------------------------------------------------------------------------
    def _grow(self, req: _Req, upto: int, force: bool = False) -> bool:
        """Give ``req`` KV for its first ``upto`` tokens (``force``: even past the pool)."""
        need = max(0, self.kv.ceil(upto) - req.covered - req.own)
        if need and not self.kv.alloc(need):
            if not force:
                return False
            self.kv.free -= need
        req.own += need
        return True

    def _match(self, req: _Req, now: float) -> int:
        """Lock the longest cached prefix of ``req``'s prompt; the tokens it saves (at most the
        prompt less one token, in whole pages)."""
        if not self.settings.prefix_cache:
            return 0
        nodes, tokens = self.kv.cached(req.outcome.request.blocks)
        if not nodes:
            return 0
        req.covered += self.kv.lock(nodes, now)
        req.path += nodes
        limit = req.outcome.request.prompt_tokens + req.generated - 1
        return min(tokens, limit) // self.page * self.page

    def _unlock(self, req: _Req) -> None:
        self.kv.unlock(req.path)
        req.path = ()
        req.covered = 0

    def _insert(self, req: _Req, now: float) -> None:
        """The prompt blocks computed so far enter the tree: after each chunk and when the
        prefill ends (SGLang's cache_unfinished_req)."""
        if self.settings.prefix_cache:
            added, moved = self.kv.insert(req.outcome.request, req.path, now, req.computed)
            req.path += added
            req.covered += moved
            req.own -= moved

    def _release(self, req: _Req) -> None:
        self.kv.free += req.own
        req.own = 0
        self._unlock(req)

    # -- the extend batch --------------------------------------------------------------------
    def _order(self, now: float) -> None:
        """``--schedule-policy lpm``: longest cached prefix first (stable), requests sharing 32+
        tokens with an earlier uncached waiting one last."""
        settings = self.settings
        if settings.schedule_policy != "lpm" or not settings.prefix_cache:
            return  # without a radix cache SGLang turns lpm into fcfs
        if len(self.waiting) > LPM_MAX_QUEUE:
            return
        seen: dict[int, int] = {}
        keys: list[tuple[float, int]] = []
        for position, req in enumerate(self.waiting):
            blocks = req.outcome.request.blocks
            cached = self.kv.cached(blocks)[1]
            key = float(-cached)
            if cached <= IN_BATCH_PREFIX_THRESHOLD:
                shared = 0
                for node in blocks:
                    if node not in seen:
                        break
                    shared += seen[node]
                if shared >= IN_BATCH_PREFIX_THRESHOLD:
                    key = float("inf")
                else:
                    size = req.outcome.request.block_tokens
                    for node in blocks:
                        seen.setdefault(node, size)
            keys.append((key, position))
        order = sorted(range(len(keys)), key=keys.__getitem__)
        self.waiting = deque(self.waiting[i] for i in order)

    def _extend_batch(self, now: float) -> list[_Req]:
        settings = self.settings
        if not self.running:
            self.batch_full = False  # SGLang: an empty running batch is never full
        if self.chunked is None and (self.batch_full or not self.waiting):
            return []
        if self.chunked is None and len(self.running) >= settings.slots:
            self.batch_full = True
            return []
        self._order(now)
        mixed = len(self.running) if settings.mixed_chunk else 0
        rem_input = settings.max_prefill_tokens - mixed
        rem_chunk = settings.batch_tokens - mixed if settings.chunked_prefill else None
        rem_total = float(self.kv.free + self.kv.evictable)
        if self.kv.capacity is not None:  # (unbounded: the reserve cannot matter)
            for r in self.running:
                rem_total -= min(r.max_new - r.generated, CLIP_MAX_NEW_TOKENS) * self.ratio
        batch: list[_Req] = []
        chunked = self.chunked
        if chunked is not None:
            assert rem_chunk is not None
            size = min(chunked.target - chunked.computed, max(rem_chunk, self.page))
            done = size == chunked.target - chunked.computed
            self._grow(chunked, chunked.computed + size, force=True)
            chunked.chunk = size
            batch.append(chunked)
            reserve = min(chunked.max_new, CLIP_MAX_NEW_TOKENS) if done else 0
            rem_total -= self.kv.ceil(size) + reserve + self.page
            rem_input -= self.kv.ceil(size)
            rem_chunk -= self.kv.ceil(size)
            self.chunked = None if done else chunked
        while self.waiting and rem_input > 0 and (rem_chunk is None or rem_chunk > 0):
            if len(self.running) + len(batch) >= settings.slots:
                self.batch_full = True
                break
            req = self.waiting[0]
            hit = self._match(req, now)
            extend = req.target - hit
            reserve = min(req.max_new - req.generated, CLIP_MAX_NEW_TOKENS)
            if rem_chunk is None or self.kv.ceil(extend) <= rem_chunk:
                whole, size = True, extend
            else:  # the prompt is cut: this request is the chunked one
                whole, size = False, rem_chunk // self.page * self.page
            no_token = extend + reserve + self.page >= rem_total
            too_long = rem_chunk is None and bool(batch) and self.kv.ceil(extend) >= rem_input
            if no_token or too_long or size <= 0 or not self._grow(req, hit + size):
                self._unlock(req)
                self.batch_full = self.batch_full or not (too_long or size <= 0)
                break
            self.waiting.popleft()
            req.computed, req.hit, req.chunk = hit, hit, size
            if req.outcome.admitted_s is None:
                req.outcome.admitted_s = now
                req.outcome.cached_tokens = hit
            batch.append(req)
            # PrefillAdder's reserve: the extend, the clipped output, one page of slack
            rem_total -= self.kv.ceil(size) + (reserve if whole else 0) + self.page
            rem_input -= self.kv.ceil(size)
            if rem_chunk is not None:
                rem_chunk -= self.kv.ceil(size)
            if not whole:
                self.chunked = req
                break
            if rem_total <= 0:
                self.batch_full = True
                break
        return batch

    # -- decode ------------------------------------------------------------------------------
    def _decode_need(self, steps: int) -> int:
        ceil = self.kv.ceil
        return sum(max(0, ceil(r.computed + steps) - r.covered - r.own) for r in self.running)

    def _room_to_decode(self) -> bool:
        """SGLang's check_decode_mem: KV for one more token each, evicting for it if need be."""
        need = self._decode_need(1)
        if self.kv.free < need:
            self.kv.evict(need - self.kv.free)
        return self.kv.free >= need

    def _grow_all(self, steps: int) -> None:
        for r in self.running:
            grow = max(0, self.kv.ceil(r.computed + steps) - r.covered - r.own)
            r.own += grow
            self.kv.free -= grow

    def _retract(self) -> None:
        """SGLang's retract_decode: fewest generated, then longest prompt, out first."""
        order = sorted(self.running, key=lambda r: (r.generated, -r.outcome.request.prompt_tokens))
        left = len(order)
        while left > 1 and self.kv.free < left * RETRACT_DECODE_STEPS:
            victim = order.pop(0)
            left -= 1
            self._release(victim)
            self.kv.evict(max(0, left * RETRACT_DECODE_STEPS - self.kv.free))
            victim.computed = 0
            victim.target = victim.outcome.request.prompt_tokens + victim.generated
            victim.outcome.preemptions += 1
            self.preemptions += 1
            self.retractions += 1
            self.running.remove(victim)
            self.waiting.append(victim)
        generated = sum(r.generated for r in self.running)
        max_new = sum(r.max_new for r in self.running)
        self.ratio = min(1.0, (generated + RETRACT_DECODE_STEPS * left) / (max_new + 1))
        self.batch_full = False

    def _decay(self, steps: int) -> None:
        """new_token_ratio after ``steps`` decode steps: the same subtractions as one a step."""
        ratio, decay, floor = self.ratio, self.ratio_decay, self.min_ratio
        while steps and ratio - decay > floor:
            ratio -= decay
            steps -= 1
        self.ratio = floor if steps else ratio

    def _decode_run(self) -> int:
        """Decode steps that stay alike from here (nobody admitted, retracted, finished or
        evicted for); 0 when the next step is not one of them."""
        if self.chunked is not None or not self.running:
            return 0
        if self.waiting and len(self.running) >= self.settings.slots:
            self.batch_full = True
        if self.waiting and not self.batch_full:
            return 0
        k = min(r.max_new - r.generated for r in self.running)
        if k < 2 or self.kv.capacity is None:
            return k if k >= 2 else 0
        if self.page == 1 and all(r.covered + r.own == r.computed for r in self.running):
            fits = self.kv.free // len(self.running)  # one token each a step, none spare
            return k if fits >= k else (fits if fits >= 2 else 0)
        if self._decode_need(1) > self.kv.free:
            return 0
        if self._decode_need(k) <= self.kv.free:
            return k
        low, high = 1, k
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self._decode_need(mid) <= self.kv.free else (low, mid)
        return low

    # -- the step ----------------------------------------------------------------------------
    def _plan_step(self, now: float) -> float | None:
        batch = self._extend_batch(now)
        self.batch = batch
        if batch:
            prefill = sum(r.chunk for r in batch)
            cached = sum(r.hit for r in batch)
            attention = sum(r.chunk * (r.computed + r.chunk / 2) for r in batch)
            decode = 0
            if self.settings.mixed_chunk and self.running and self._room_to_decode():
                self._grow_all(1)
                decode = len(self.running)
                attention += sum(r.computed for r in self.running)
            for r in batch:
                r.hit = 0
            self._mixed = decode > 0
            return self.cost.step_s(prefill, decode, attention / 1000.0, cached)
        if not self.running:
            return None
        if self._room_to_decode():
            self._decay(1)
        else:
            self._retract()
            self.kv.evict(max(0, self._decode_need(1) - self.kv.free))
        self._grow_all(1)
        self._mixed = True
        attention = sum(r.computed for r in self.running)
        return self.cost.step_s(0, len(self.running), attention / 1000.0)

    _mixed = False  # the running requests decode in the planned step

    def _run_shape(self) -> tuple[int, int]:
        return len(self.running), sum(r.computed for r in self.running)

    def _finish(self, r: _Req, end: float) -> bool:
        if r.generated < r.max_new:
            return False
        r.outcome.done_s = end
        self.finished.append(r.outcome)
        self._release(r)
        self.batch_full = False
        return True

    def _apply_step(self, end: float) -> None:
        if self.in_run:
            self._grow_all(self.repeat)
            self._decay(self.repeat)
            steps, self.repeat, self.in_run = self.repeat, 1, False
        else:
            steps = 1 if self._mixed else 0
        self._mixed = False
        if steps:
            still: list[_Req] = []
            for r in self.running:
                r.computed += steps
                r.generated += steps
                r.target = r.computed + 1
                if not self._finish(r, end):
                    still.append(r)
            self.running = still
        for r in self.batch:
            r.computed += r.chunk
            r.chunk = 0
            self._insert(r, end)
            if r.computed < r.target:
                continue  # the chunked request: its next chunk leads the next extend batch
            if r.outcome.first_token_s is None:
                r.outcome.first_token_s = end
            r.generated += 1
            r.target = r.computed + 1
            if not self._finish(r, end):
                self.running.append(r)
        self.batch = []
