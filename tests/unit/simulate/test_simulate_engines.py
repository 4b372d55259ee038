"""The scheduler models against what the real engines are known to do (DESIGN.md's facts),
with a made-up cost model: the tests check relations, never a machine's speed."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from ttft.simulate.fleet import simulate
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest, poisson_times, synthetic

# about the embedded engine on this machine: ~440 prompt tokens/s, ~50 decode tokens/s
COST = CostModel(
    step_base_s=0.01,
    prefill_token_s=1 / 440,
    decode_seq_s=0.02,
    attention_s=0.0002,
    overhead_s=0.02,
)


def ttfts(result_outcomes: list) -> list[float]:  # type: ignore[type-arg]
    return [o.ttft_s for o in result_outcomes]


def test_one_slot_queues_a_burst_into_a_staircase() -> None:
    burst = synthetic(4, prompt_tokens=600, output_tokens=1)
    got = ttfts(simulate(burst, COST, EngineSettings(slots=1)).outcomes)
    steps = [b - a for a, b in itertools.pairwise(got)]
    assert got == sorted(got)
    # each request waits for the whole prefill of the ones before it
    for step in steps:
        assert step == pytest.approx(got[0] - COST.overhead_s, rel=0.05)


def test_four_slots_share_one_batch_so_the_burst_finishes_together() -> None:
    burst = [SimRequest(0.0, 600, 1, (i,), 600, i) for i in range(4)]
    one = simulate(burst, COST, EngineSettings(slots=1)).outcomes
    four = simulate(burst, COST, EngineSettings(slots=4, batch_tokens=4096)).outcomes
    # the last of the burst is served about as late either way (same work, one engine) ...
    assert four[-1].ttft_s == pytest.approx(one[-1].ttft_s, rel=0.15)
    # ... but the batch's members all wait for it: no staircase
    assert max(ttfts(four[1:])) / min(ttfts(four[1:])) < 1.05


def test_a_slot_reuses_the_prefix_of_its_last_prompt() -> None:
    first = SimRequest(0.0, 1024, 4, (1, 2), 512, 0)
    again = SimRequest(100.0, 1024, 4, (1, 3), 512, 1)
    out = simulate([first, again], COST, EngineSettings(slots=2)).outcomes
    assert out[1].cached_tokens == 512
    assert out[1].ttft_s < 0.7 * out[0].ttft_s
    off = simulate([first, again], COST, EngineSettings(slots=2, prefix_cache=False)).outcomes
    assert off[1].cached_tokens == 0


def test_the_host_prompt_cache_restores_a_prefix_another_request_evicted_from_its_slot() -> None:
    first = SimRequest(0.0, 1024, 4, (1, 2), 512, 0)
    other = SimRequest(50.0, 1024, 4, (7, 8), 512, 1)  # takes the only slot
    again = SimRequest(100.0, 1024, 4, (1, 3), 512, 2)
    reqs = [first, other, again]
    on = simulate(reqs, COST, EngineSettings(slots=1)).outcomes
    off = simulate(reqs, COST, EngineSettings(slots=1, host_cache_tokens=0)).outcomes
    assert on[2].cached_tokens == 512 and off[2].cached_tokens == 0


def test_a_prefix_held_only_by_a_busy_slot_does_not_help_another_slot() -> None:
    """As measured on the embedded llama-server (2 slots, a 640-token prefix): a finished
    prompt stays in its slot, not in the host cache, so a request that arrives while that slot
    is busy computes the prefix again; once another prompt displaced it (f_keep < 0.5) it is in
    the host cache and a request in any slot restores it."""

    def req(t: float, head: int, tail: int, i: int) -> SimRequest:
        return SimRequest(t, 1024, 4, (head, head + 1, head + 2, tail), 256, i)

    a1 = req(0.0, 1, 100, 0)
    a2 = req(100.0, 1, 101, 1)  # into a1's slot: its own KV (keeps 768 of 1028 tokens)
    a3 = req(100.01, 1, 102, 2)  # the other slot, a2's is busy: nothing in the host cache
    b4 = req(200.0, 7, 103, 3)  # displaces an A prompt (keeps none of it): A is saved
    b5 = req(300.0, 7, 104, 4)
    a6 = req(400.0, 1, 105, 5)
    a7 = req(400.01, 1, 106, 6)  # the B slot: A restored from the host cache
    out = simulate([a1, a2, a3, b4, b5, a6, a7], COST, EngineSettings(slots=2)).outcomes
    assert [o.cached_tokens for o in out] == [0, 768, 0, 0, 768, 768, 768]


def test_an_idle_slot_is_saved_to_the_host_cache_when_a_task_starts_elsewhere() -> None:
    """--cache-idle-slots: b2 starts in the empty slot while a1's slot is idle, which saves a1's
    prompt; so of two concurrent A requests later, the one in b2's slot restores A too."""

    def req(t: float, head: int, tail: int, i: int) -> SimRequest:
        return SimRequest(t, 1024, 4, (head, head + 1, head + 2, tail), 256, i)

    reqs = [req(0.0, 1, 100, 0), req(100.0, 7, 101, 1), req(200.0, 1, 102, 2)]
    reqs.append(req(200.01, 1, 103, 3))
    out = simulate(reqs, COST, EngineSettings(slots=2)).outcomes
    assert [o.cached_tokens for o in out] == [0, 0, 768, 768]


def test_a_prompt_loaded_from_the_host_cache_leaves_it() -> None:
    """As measured (3 slots, 640-token prefix A): after a1, b2 and c3 ran one by one, three A
    requests sent together restore 641 (a4, its own slot), 641 (a5, from the host cache) and 1
    token (a6): the cache moved its one copy of A into a5's slot."""

    def req(t: float, head: int, tail: int, i: int) -> SimRequest:
        return SimRequest(t, 1024, 4, (head, head + 1, head + 2, tail), 256, i)

    reqs = [req(0.0, 1, 100, 0), req(100.0, 7, 101, 1), req(200.0, 13, 102, 2)]
    reqs += [req(300.0, 1, 103, 3), req(300.01, 1, 104, 4), req(300.02, 1, 105, 5)]
    out = simulate(reqs, COST, EngineSettings(slots=3)).outcomes
    assert [o.cached_tokens for o in out] == [0, 0, 0, 768, 768, 0]


def test_a_hit_in_the_prompts_own_slot_is_charged_the_fitted_cost_per_cached_token() -> None:
    """cached_token_s is fitted on hits in the slot that holds the prefix (the calibration's
    cached phase), so such a hit pays it, not only a restore from the host cache."""
    first = SimRequest(0.0, 1024, 4, (1, 2), 512, 0)
    again = SimRequest(100.0, 1024, 4, (1, 3), 512, 1)
    free = simulate([first, again], COST, EngineSettings(slots=1)).outcomes[1]
    priced = replace(COST, cached_token_s=0.001)
    paid = simulate([first, again], priced, EngineSettings(slots=1)).outcomes[1]
    assert free.cached_tokens == paid.cached_tokens == 512
    assert paid.ttft_s is not None and free.ttft_s is not None
    assert paid.ttft_s - free.ttft_s == pytest.approx(0.512, rel=1e-6)


def test_a_prompt_longer_than_a_slot_is_refused_not_lost() -> None:
    reqs = [SimRequest(0.0, 3000, 4, (), 512, 0), SimRequest(0.0, 100, 4, (), 512, 1)]
    out = simulate(reqs, COST, EngineSettings(slots=2, ctx_per_slot=2048)).outcomes
    assert out[0].refused is not None and not out[0].ok
    assert out[1].ok


def test_vllm_chunked_prefill_splits_a_long_prompt_into_budget_sized_steps() -> None:
    long = [SimRequest(0.0, 8000, 1, (), 512, 0)]
    chunked = simulate(long, COST, EngineSettings(kind="vllm", batch_tokens=512))
    whole = simulate(
        long, COST, EngineSettings(kind="vllm", batch_tokens=512, chunked_prefill=False)
    )
    assert chunked.steps == -(-8000 // 512)
    assert whole.steps == 1  # without chunking a prompt over the budget runs alone, whole
    assert chunked.outcomes[0].ok and whole.outcomes[0].ok


def test_vllm_prefix_cache_hits_across_requests_and_saves_prefill() -> None:
    reqs = synthetic(40, prompt_tokens=1200, output_tokens=8, shared_prefix_tokens=1024)
    reqs = poisson_times(reqs, 0.5, seed=3)
    settings = EngineSettings(kind="vllm", slots=16, batch_tokens=2048, kv_blocks=4000)
    cached = simulate(reqs, COST, settings).outcomes
    assert all(o.cached_tokens >= 1008 for o in cached[1:])
    cold = simulate(reqs, COST, EngineSettings(kind="vllm", slots=16, prefix_cache=False)).outcomes
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    assert mean(ttfts(cached)) < 0.5 * mean(ttfts(cold))


@pytest.mark.parametrize(("request_block", "kv_block"), [(16, 128), (16, 16), (512, 16)])
def test_vllm_caches_whole_kv_blocks_whatever_the_requests_block_size(
    request_block: int, kv_block: int
) -> None:
    """vLLM's CPU build has 128-token KV blocks and synthetic prompts hash 16-token blocks:
    a 512-token shared prefix is four KV blocks, all reused by the next request. (Each 16-token
    entry once took a whole KV block, so a request could publish only 80 tokens of its prefix
    and the model saw a cold engine where vLLM served every repeat from its cache.)"""
    first, second = synthetic(
        2, prompt_tokens=600, output_tokens=2, shared_prefix_tokens=512, block_tokens=request_block
    )
    settings = EngineSettings(kind="vllm", slots=4, batch_tokens=2048, block_tokens=kv_block)
    got = simulate([first, replace(second, arrival_s=5.0)], COST, settings).outcomes
    assert [o.cached_tokens for o in got] == [0, 512]


def test_vllm_preempts_when_kv_blocks_run_out_and_every_request_still_finishes() -> None:
    reqs = synthetic(30, prompt_tokens=400, output_tokens=300, seed=1)
    small_kv = EngineSettings(kind="vllm", slots=30, batch_tokens=2048, kv_blocks=300)
    result = simulate(reqs, COST, small_kv)
    assert result.preemptions > 0
    assert all(o.done_s is not None for o in result.outcomes)
    roomy = simulate(reqs, COST, EngineSettings(kind="vllm", slots=30, kv_blocks=100_000))
    assert roomy.preemptions == 0


def test_vllm_max_num_seqs_caps_what_runs_at_once() -> None:
    reqs = synthetic(8, prompt_tokens=100, output_tokens=50)
    capped = simulate(reqs, COST, EngineSettings(kind="vllm", slots=2)).outcomes
    admitted = sorted(o.admitted_s for o in capped)
    assert admitted[1] == 0.0 and admitted[2] > 0.0


def test_fast_forwarded_decode_runs_give_the_step_by_step_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ttft.simulate import llamacpp

    reqs = poisson_times(
        synthetic(
            400, prompt_tokens=300, output_tokens=40, shared_prefix_tokens=128, prefix_groups=4
        ),
        3.0,
        seed=1,
    )
    fast = simulate(reqs, COST, EngineSettings(slots=4), replicas=3, policy="prefix-affinity")
    plan = llamacpp.LlamaCppReplica._plan_step

    def one_at_a_time(self: llamacpp.LlamaCppReplica, now: float) -> float | None:
        duration = plan(self, now)
        if self.repeat > 1:
            self.steps -= self.repeat - 1
            self.repeat = 1
            return self._run[0]
        return duration

    monkeypatch.setattr(llamacpp.LlamaCppReplica, "_plan_step", one_at_a_time)
    slow = simulate(reqs, COST, EngineSettings(slots=4), replicas=3, policy="prefix-affinity")
    assert fast.steps == slow.steps
    for a, b in zip(fast.outcomes, slow.outcomes, strict=True):
        assert a.ttft_s == pytest.approx(b.ttft_s, abs=1e-6)
        assert a.replica == b.replica


def test_vllm_counts_a_cached_prefix_once_in_kv_blocks() -> None:
    """Requests that share a 1024-token prefix hold it once: in a cache that fits the prefix
    plus a few private tails, none of them is preempted."""
    reqs = synthetic(12, prompt_tokens=1100, output_tokens=20, shared_prefix_tokens=1024)
    reqs = poisson_times(reqs, 2.0, seed=4)
    # 1024/16 = 64 shared blocks + 12 x (76 + 20) / 16 = 72 private ones < 160
    small = EngineSettings(kind="vllm", slots=12, batch_tokens=4096, kv_blocks=160)
    assert simulate(reqs, COST, small).preemptions == 0
