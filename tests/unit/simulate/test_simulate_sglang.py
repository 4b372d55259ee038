"""The SGLang scheduler model (simulate/sglang.py, simulate/radix.py): each rule on a scenario
small enough to work out by hand, and the decode fast-forward against step by step.

Unless a test says otherwise a step costs 10 ms + 1 ms per prompt token + 1 ms per decoding
sequence (no attention term, no client overhead), so times can be added up on paper."""

from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.simulate import sglang
from ttft.simulate.engine import SimOutcome
from ttft.simulate.fleet import FleetResult, Policy, make_replica, simulate
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.radix import Node, RadixPool
from ttft.simulate.requests import SimRequest, poisson_times, synthetic

COST = CostModel(step_base_s=0.01, prefill_token_s=0.001, decode_seq_s=0.001)


def _sg(**changes: object) -> EngineSettings:
    base: dict[str, object] = {"kind": "sglang", "slots": 8, "batch_tokens": 8192}
    base.update(changes)
    base.setdefault("block_tokens", 1)
    return EngineSettings(**base)  # type: ignore[arg-type]


def _req(
    index: int, at: float, prompt: int, out: int, blocks: tuple[int, ...] = (), size: int = 64
) -> SimRequest:
    return SimRequest(at, prompt, out, blocks or (10_000 + index,), size, index)


def _run(requests: list[SimRequest], settings: EngineSettings) -> list[SimOutcome]:
    return sorted(simulate(requests, COST, settings).outcomes, key=lambda o: o.request.index)


def test_the_fleet_builds_an_sglang_replica_for_kind_sglang() -> None:
    assert isinstance(make_replica(COST, _sg(), 0), sglang.SglangReplica)


def test_a_schedule_policy_the_model_does_not_know_is_refused() -> None:
    with pytest.raises(TtftError, match="not modelled"):
        _sg(schedule_policy="dfs-weight").check()


def test_the_chunk_size_must_be_whole_pages_as_sglang_asserts() -> None:
    with pytest.raises(TtftError, match="multiple of its page size"):
        _sg(batch_tokens=100, block_tokens=16).check()
    _sg(batch_tokens=100, block_tokens=16, chunked_prefill=False).check()  # -1: no chunks


def test_schedule_conservativeness_scales_the_starting_new_token_ratio() -> None:
    """init = min(0.7 x conservativeness, 1), floor = init x 0.14, reached after 600 decode
    steps."""
    assert sglang.SglangReplica(COST, _sg()).ratio == pytest.approx(0.7)
    careful = sglang.SglangReplica(COST, _sg(schedule_conservativeness=2.0))
    assert careful.ratio == 1.0
    bold = sglang.SglangReplica(COST, _sg(schedule_conservativeness=0.5))
    assert bold.ratio == pytest.approx(0.35)
    bold._decay(300)
    assert bold.ratio == pytest.approx(0.35 - 300 * (0.35 - 0.049) / 600)
    bold._decay(10_000)
    assert bold.ratio == pytest.approx(0.049)


def test_a_decode_batch_waits_while_a_new_prefill_runs() -> None:
    """A (100-token prompt, 5 tokens) decodes from 0.110 s; B (200 tokens) arrives at 0.115 s.
    After A's decode step ending 0.121 s, B's extend batch runs alone (0.210 s) while A waits:
    B's first token at 0.331 s; then A and B decode together (12 ms) until B is done at 0.343 s
    and A alone (11 ms) twice more: A is done at 0.365 s."""
    a, b = _run([_req(0, 0.0, 100, 5), _req(1, 0.115, 200, 2)], _sg())
    assert a.first_token_s == pytest.approx(0.110)
    assert b.first_token_s == pytest.approx(0.331)
    assert b.done_s == pytest.approx(0.343)
    assert a.done_s == pytest.approx(0.365)


def test_where_vllm_decodes_beside_a_new_prompt_sglang_stalls_the_decode() -> None:
    """The same arrivals on both models: vLLM's step carries A's decode token beside B's prompt
    (one budget, mixed), SGLang's extend step leaves A waiting, so A finishes a step later."""
    arrivals = [_req(0, 0.0, 100, 5), _req(1, 0.115, 200, 2)]
    a_sg, _ = _run(arrivals, _sg())
    vllm_settings = EngineSettings(kind="vllm", slots=8, batch_tokens=8192)
    a_vllm, _ = _run(arrivals, vllm_settings)
    assert a_vllm.done_s == pytest.approx(0.355)  # as SGLang with --enable-mixed-chunk
    assert a_sg.done_s == pytest.approx(0.365)


def test_with_mixed_chunk_the_decoding_requests_ride_in_the_extend_batch() -> None:
    """--enable-mixed-chunk: B's extend batch also decodes A (0.211 s, ending 0.332 s), so A
    has 3 tokens then; A and B decode together once (B done at 0.344 s), A once more (0.355 s)."""
    a, b = _run([_req(0, 0.0, 100, 5), _req(1, 0.115, 200, 2)], _sg(mixed_chunk=True))
    assert b.first_token_s == pytest.approx(0.332)
    assert b.done_s == pytest.approx(0.344)
    assert a.done_s == pytest.approx(0.355)


def test_a_long_prompt_is_prefilled_one_chunk_per_extend_step() -> None:
    """--chunked-prefill-size 256: a 1000-token prompt takes chunks of 256, 256, 256 and 232,
    one extend step each: 4 x 10 ms + 1000 x 1 ms."""
    (only,) = _run([_req(0, 0.0, 1000, 1)], _sg(batch_tokens=256))
    assert only.first_token_s == pytest.approx(1.040)


def test_a_short_prompt_waits_for_the_chunk_that_leaves_it_room() -> None:
    """L (600 tokens) is chunked 256 + 256 + 88; S (50 tokens) arrives during the first chunk.
    The second chunk takes the whole budget, so S joins the third (88 + 50 tokens): both get
    their first token at 0.266 + 0.266 + 0.148 = 0.680 s."""
    long, short = _run([_req(0, 0.0, 600, 1), _req(1, 0.001, 50, 1)], _sg(batch_tokens=256))
    assert long.first_token_s == pytest.approx(0.680)
    assert short.first_token_s == pytest.approx(0.680)


def test_each_finished_chunk_is_cached_for_a_request_waiting_behind_it() -> None:
    """SGLang caches a chunked prompt after each chunk (cache_unfinished_req): M, the same
    600-token prompt as L arriving during L's first chunk, joins L's last chunk having found
    L's first two chunks (512 tokens, 8 blocks of 64) cached, so that step computes 88 + 88
    tokens (0.186 s) and both first tokens come at 0.266 + 0.266 + 0.186 = 0.718 s."""
    blocks = tuple(range(1, 11))
    long, same = _run(
        [_req(0, 0.0, 600, 1, blocks), _req(1, 0.001, 600, 1, blocks)], _sg(batch_tokens=256)
    )
    assert same.cached_tokens == 512
    assert long.first_token_s == pytest.approx(0.718)
    assert same.first_token_s == pytest.approx(0.718)


def test_without_chunking_max_prefill_tokens_ends_the_extend_batch() -> None:
    """--chunked-prefill-size -1, --max-prefill-tokens 400: two 300-token prompts at once. The
    first is admitted (the first always is); the second does not fit what is left and runs in
    the next extend step (0.310 s), ahead of the first one's decoding."""
    first, second = _run(
        [_req(0, 0.0, 300, 3), _req(1, 0.0, 300, 1)],
        _sg(chunked_prefill=False, max_prefill_tokens=400),
    )
    assert first.first_token_s == pytest.approx(0.310)
    assert second.first_token_s == pytest.approx(0.620)
    assert first.done_s == pytest.approx(0.620 + 0.011 * 2)


def test_max_running_requests_holds_the_third_request() -> None:
    """--max-running-requests 2: three 100-token prompts with 2 tokens each; the third is
    admitted when the first two are done (0.210 + 0.012 = 0.222 s)."""
    outcomes = _run([_req(i, 0.0, 100, 2) for i in range(3)], _sg(slots=2))
    assert [o.admitted_s for o in outcomes] == pytest.approx([0.0, 0.0, 0.222])


def test_the_kv_reserved_for_running_requests_holds_back_a_prefill() -> None:
    """KV pool of 1000 tokens. A (100 tokens, 800 to generate) is admitted (100 + 800 + 1 page
    < 1000). B (300 tokens, 100 to generate) arrives when A has generated a few tokens: free KV
    is ~890, of which A's remaining ~795 tokens x new_token_ratio ~0.7 are held back, so
    300 + 100 + 1 does not fit and the batch is full until A is done."""
    a, b = _run([_req(0, 0.0, 100, 800), _req(1, 0.15, 300, 100)], _sg(kv_blocks=1000))
    assert a.done_s is not None and b.admitted_s is not None
    assert b.admitted_s == pytest.approx(a.done_s)
    _, free_b = _run([_req(0, 0.0, 100, 800), _req(1, 0.15, 300, 100)], _sg())
    assert free_b.admitted_s is not None and free_b.admitted_s < 0.2  # no pool limit


def test_a_cached_prefix_is_reused_up_to_the_prompt_less_one_token() -> None:
    """A 100-token prompt (blocks of 64 + 36) computed once: the same prompt again reuses 99
    tokens (SGLang computes at least one), a prompt sharing the first block reuses 64, and
    with --page-size 16 the reuse is cut to whole pages (96)."""
    first = _req(0, 0.0, 100, 1, (1, 2))
    again = _req(1, 1.0, 100, 1, (1, 2))
    sibling = _req(2, 2.0, 100, 1, (1, 3))
    outcomes = _run([first, again, sibling], _sg())
    assert [o.cached_tokens for o in outcomes] == [0, 99, 64]
    assert outcomes[1].first_token_s == pytest.approx(1.0 + 0.011)  # one token computed
    paged = _run([first, again], _sg(block_tokens=16, kv_blocks=100))
    assert paged[1].cached_tokens == 96
    off = _run([first, again], _sg(prefix_cache=False))
    assert off[1].cached_tokens == 0  # --disable-radix-cache


def test_eviction_drops_the_least_recently_used_unlocked_leaf_first() -> None:
    """Prompts X = blocks (1, 2) and Y = (1, 3), 4 tokens a block, cached at t=1 and t=2. Node 1
    is shared; asking for 4 tokens evicts X's leaf 2 (older), then Y's leaf 3; node 1 goes last
    (a leaf only once its children are gone); a locked node is never evicted."""
    pool = RadixPool(capacity=16, page=1)
    assert pool.alloc(8)
    x_nodes, moved = pool.insert(SimRequest(0.0, 8, 1, (1, 2), 4), (), 1.0, 8)
    assert ([n.key for n in x_nodes], moved) == ([1, 2], 8)
    pool.unlock(x_nodes)
    held, tokens = pool.cached((1, 3))
    assert ([n.key for n in held], tokens) == ([1], 4)
    pool.lock(held, 2.0)
    assert pool.alloc(4)
    y_nodes, _ = pool.insert(SimRequest(0.0, 8, 1, (1, 3), 4), held, 2.0, 8)
    pool.unlock(held + y_nodes)
    assert pool.free == 4 and pool.evictable == 12
    pool.evict(4)
    assert sorted(pool.nodes) == [1, 3]
    shared = pool.nodes[1]
    pool.lock((shared,), 3.0)  # a request now uses node 1
    pool.evict(8)
    assert sorted(pool.nodes) == [1]  # leaf 3 went; the locked node 1 stays
    pool.unlock((shared,))
    pool.evict(4)
    assert pool.nodes == {} and pool.free == 16 and pool.evictable == 0


def _lpm_scene() -> list[SimRequest]:
    """A caches blocks (1, 2, 3); C then runs alone (one slot) while B1 (nothing cached) and B2
    (shares A's first 128 tokens) arrive in that order."""
    return [
        _req(0, 0.0, 192, 1, (1, 2, 3)),
        _req(1, 0.3, 64, 20, (60,)),
        _req(2, 0.4, 192, 1, (50, 51, 52)),
        _req(3, 0.41, 192, 1, (1, 2, 40)),
    ]


def test_lpm_admits_the_longest_cached_prefix_first_and_fcfs_the_oldest() -> None:
    fcfs = _run(_lpm_scene(), _sg(slots=1))
    lpm = _run(_lpm_scene(), _sg(slots=1, schedule_policy="lpm"))
    c_done = fcfs[1].done_s
    assert c_done is not None
    assert fcfs[2].admitted_s == pytest.approx(c_done)
    assert fcfs[2].admitted_s < fcfs[3].admitted_s  # type: ignore[operator]
    assert lpm[3].admitted_s == pytest.approx(c_done)
    assert lpm[3].cached_tokens == 128
    assert lpm[3].admitted_s < lpm[2].admitted_s  # type: ignore[operator]


def test_lpm_defers_a_request_sharing_an_uncached_prefix_with_an_earlier_one() -> None:
    """In-batch prefix caching: of two waiting requests sharing 64 uncached tokens, the second
    is sorted behind a later unrelated one; once the first has cached the prefix, the second
    leads the next sort with its 64-token hit."""
    replica = sglang.SglangReplica(COST, _sg(schedule_policy="lpm"))
    for i, blocks in ((1, (7, 8)), (2, (7, 9)), (3, (70, 71))):
        replica._enqueue(SimOutcome(_req(i, 0.0, 128, 1, blocks)))
    replica._order(0.0)
    assert [r.outcome.request.index for r in replica.waiting] == [1, 3, 2]
    scene = [
        _req(0, 0.0, 64, 20, (60,)),
        _req(1, 0.1, 128, 1, (7, 8)),
        _req(2, 0.11, 128, 1, (7, 9)),
        _req(3, 0.12, 128, 1, (70, 71)),
    ]
    out = _run(scene, _sg(slots=1, schedule_policy="lpm"))
    assert sorted(range(1, 4), key=lambda i: out[i].admitted_s or 0.0) == [1, 2, 3]
    assert out[2].cached_tokens == 64


def test_lpm_falls_back_to_fcfs_with_more_than_128_waiting() -> None:
    replica = sglang.SglangReplica(COST, _sg(schedule_policy="lpm"))
    replica.kv.nodes[1] = Node(1, 64, None)  # a cached block the last request would match
    for i in range(130):
        outcome = SimOutcome(_req(i, 0.0, 64, 1, (1,) if i == 129 else (500 + i,)))
        replica._enqueue(outcome)
    replica._order(0.0)
    assert replica.waiting[0].outcome.request.index == 0  # 130 waiting: not sorted
    while len(replica.waiting) > 128:
        replica.waiting.popleft()
    replica._order(0.0)
    assert replica.waiting[0].outcome.request.index == 129


def test_retraction_takes_the_fewest_generated_then_the_longest_prompt() -> None:
    """retract_decode: out go the requests with the fewest tokens generated (then the longest
    prompt) until 20 decode steps of the rest fit; new_token_ratio becomes
    (generated + 20 x left) / (max_new + 1) over those left."""
    replica = sglang.SglangReplica(COST, _sg(kv_blocks=1000))
    specs = [(0, 50, 30), (1, 80, 10), (2, 40, 10)]  # index, prompt, generated
    for index, prompt, generated in specs:
        req = sglang._Req(
            SimOutcome(_req(index, 0.0, prompt, 100)), generated=generated, max_new=100
        )
        req.computed = prompt + generated
        req.own = 5  # the rest of its KV in the tree, say
        replica.running.append(req)
    replica.kv.free = 0  # three running need 60 free tokens, two 40: only one is left
    replica._retract()
    assert [r.outcome.request.index for r in replica.waiting] == [1, 2]
    assert [r.outcome.request.index for r in replica.running] == [0]
    assert replica.waiting[0].target == 80 + 10  # prompt and generated computed again
    assert replica.ratio == pytest.approx((30 + 20) / (100 + 1))


def _facts(result: FleetResult) -> tuple[object, ...]:
    per_request = [
        (o.request.index, o.replica, o.admitted_s, o.first_token_s, o.done_s, o.cached_tokens)
        for o in result.outcomes
    ]
    return per_request, result.steps, result.preemptions, result.busy_s


@pytest.mark.parametrize(
    ("kv", "policy", "mixed", "route"),
    [
        (None, "fcfs", False, "least-loaded"),
        (1200, "fcfs", False, "least-loaded"),
        (1200, "lpm", True, "prefix-affinity"),
        (3000, "lpm", False, "round-robin"),
        (None, "fcfs", True, "prefix-affinity"),
    ],
)
def test_decode_runs_give_exactly_the_step_by_step_results(
    monkeypatch: pytest.MonkeyPatch, kv: int | None, policy: str, mixed: bool, route: Policy
) -> None:
    """Fast-forwarded decode runs (cut at the step after an arrival) change nothing: the same
    floats for every request, step count and busy time, with retractions (kv 1200) too."""
    mix = synthetic(
        200, prompt_tokens=300, output_tokens=60, shared_prefix_tokens=128, prefix_groups=4
    )
    reqs = poisson_times(mix, 12.0, seed=1)
    cost = CostModel(0.01, 0.0004, 0.002, 0.0001, 0.00001, 0.05)
    settings = _sg(
        slots=6, batch_tokens=512, kv_blocks=kv, schedule_policy=policy, mixed_chunk=mixed
    )
    fast = simulate(reqs, cost, settings, replicas=3, policy=route, speed_factor=1.1)
    monkeypatch.setattr(sglang.SglangReplica, "fast_forward", False)
    slow = simulate(reqs, cost, settings, replicas=3, policy=route, speed_factor=1.1)
    assert _facts(fast) == _facts(slow)
    assert all(o.ok for o in fast.outcomes)
    if kv == 1200:
        assert fast.preemptions > 0  # the runs stop where the pool runs short


def test_settings_come_from_sglang_server_info_with_its_defaults_for_absent_fields() -> None:
    from ttft.simulate.targets import sglang_settings

    info: dict[str, object] = {
        "max_running_requests": 48,
        "chunked_prefill_size": 4096,
        "max_prefill_tokens": 16384,
        "context_length": 32768,
        "page_size": 16,
        "max_total_num_tokens": 160_000,
        "schedule_policy": "lpm",
        "disable_radix_cache": False,
        "enable_mixed_chunk": True,
        "schedule_conservativeness": 0.5,
    }
    got = sglang_settings(info)
    assert got.schedule_conservativeness == 0.5
    assert (got.kind, got.slots, got.batch_tokens, got.block_tokens) == ("sglang", 48, 4096, 16)
    assert got.kv_blocks == 10_000  # pages of 16 tokens
    assert got.max_prefill_tokens == 32768  # at least the context length
    assert (got.schedule_policy, got.mixed_chunk, got.prefix_cache) == ("lpm", True, True)
    bare = sglang_settings({})
    assert (bare.slots, bare.batch_tokens, bare.block_tokens, bare.kv_blocks) == (
        256,
        8192,
        1,
        None,
    )
    assert (bare.max_prefill_tokens, bare.schedule_policy, bare.chunked_prefill) == (
        16384,
        "fcfs",
        True,
    )
    off = sglang_settings(
        {"chunked_prefill_size": -1, "disable_radix_cache": True, "schedule_policy": "lof"}
    )
    assert (off.chunked_prefill, off.prefix_cache, off.schedule_policy) == (False, False, "fcfs")
    given = sglang_settings(info, slots=8, batch_tokens=1024, kv_pages=500)
    assert (given.slots, given.batch_tokens, given.kv_blocks) == (8, 1024, 500)


def test_server_info_is_read_from_the_newer_endpoint_then_the_older_one() -> None:
    from ttft.engines.control import Call, ControlError
    from ttft.simulate.targets import sglang_info

    class Fake:
        def __init__(self, answers: dict[str, dict[str, object]]) -> None:
            self.answers = answers
            self.asked: list[str] = []

        def send(self, call: Call, timeout_s: float | None = None) -> dict[str, object]:
            self.asked.append(call.path)
            if call.path not in self.answers:
                raise ControlError("not found", status=404)
            return self.answers[call.path]

    old = Fake({"/get_server_info": {"page_size": 1, "internal_states": [{"x": 1}]}})
    assert sglang_info(old) == {"x": 1, "page_size": 1, "internal_states": [{"x": 1}]}  # type: ignore[arg-type]
    assert old.asked == ["/server_info", "/get_server_info"]
    assert sglang_info(Fake({})) == {}  # type: ignore[arg-type]


def test_the_schedule_policy_axis_is_sglang_only_and_knows_fcfs_and_lpm() -> None:
    from ttft.simulate.sweep import schedule_axis

    assert schedule_axis(None, "llamacpp") == [None]
    assert schedule_axis("fcfs,lpm", "sglang") == ["fcfs", "lpm"]
    with pytest.raises(TtftError, match="SGLang's"):
        schedule_axis("lpm", "vllm")
    with pytest.raises(TtftError, match="not modelled"):
        schedule_axis("lof", "sglang")


def test_an_output_longer_than_the_pool_holds_is_clipped_not_left_waiting() -> None:
    """SGLang clips max_new_tokens so prompt + output + a page fit the pool (1000 tokens): a
    500-token prompt asking for 600 generates 1000 - 500 - 1 - 1 = 498 and finishes; a prompt
    that leaves no room is refused."""
    long, huge = _run([_req(0, 0.0, 500, 600), _req(1, 0.0, 999, 1)], _sg(kv_blocks=1000))
    assert long.ok and long.done_s is not None
    assert long.done_s == pytest.approx(0.510 + 497 * 0.011)
    assert huge.refused == "prompt larger than the whole KV cache"


def test_a_multi_replica_validation_of_sglang_is_refused_without_a_url() -> None:
    """ttft starts llama.cpp and its own vLLM, never SGLang: the fleet is refused before any
    engine starts."""
    from ttft.simulate.live_fleet import embedded_fleet

    with (
        pytest.raises(TtftError, match="starts no sglang replicas"),
        embedded_fleet(2, slots=2, policy="least-loaded", kind="sglang"),
    ):
        pass
