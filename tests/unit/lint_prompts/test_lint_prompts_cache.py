"""The prefix-cache replay: ideal cache, one slot, vLLM blocks, llama-server checkpoints."""

from __future__ import annotations

from ttft.lint.prompts.prefix_cache import CACHE_MODELS, distribution, prefix_groups, simulate

SYSTEM = list(range(100))


def test_each_request_hits_its_longest_common_prefix_with_any_earlier_request() -> None:
    a = [*SYSTEM, 1000, 1001]
    b = [7, 7, 7]
    c = [*SYSTEM, 2000]
    sim = simulate([a, b, c])
    assert sim.shared_ideal == [0, 0, 100]
    assert sim.best_earlier == [None, None, 0]
    assert sim.cached_ideal == [0, 0, 100]
    # One slot holds only the previous prompt (b), which shares nothing with c.
    assert sim.cached_one_slot == [0, 0, 0]
    assert sim.hit_rate_ideal == 100 / (102 + 3 + 101)


def test_an_identical_prompt_still_computes_its_last_token() -> None:
    sim = simulate([SYSTEM, SYSTEM])
    assert sim.shared_ideal[1] == 100
    assert sim.cached_ideal[1] == 99


def test_vllm_reuses_whole_16_token_blocks_only() -> None:
    sim = simulate([[*SYSTEM, 1], [*SYSTEM, 2]], CACHE_MODELS["vllm"])
    assert sim.cached_ideal[1] == 96


def test_checkpoint_model_resumes_one_token_before_a_user_message_start() -> None:
    # llama-server with a sliding-window model restores a checkpoint at the last user message
    # (here at token 100) and recomputes the checkpoint's last position: 99 tokens reused.
    sim = simulate(
        [[*SYSTEM, 1, 1], [*SYSTEM, 2, 2]],
        CACHE_MODELS["checkpoint"],
        restore_points=[[100], [100]],
    )
    assert sim.cached_ideal == [0, 99]


def test_checkpoint_model_reuses_nothing_when_prompts_part_before_the_first_checkpoint() -> None:
    first = [0, 1, 2, *SYSTEM]
    second = [0, 1, 3, *SYSTEM]
    sim = simulate([first, second], CACHE_MODELS["checkpoint"], restore_points=[[103], [103]])
    assert sim.shared_ideal[1] == 2
    assert sim.cached_ideal[1] == 0


def test_checkpoint_model_reuses_the_earlier_prompt_up_to_five_tokens_before_its_end() -> None:
    # A repeated prompt restores the checkpoint taken 4 tokens before the end, minus one.
    sim = simulate([SYSTEM, SYSTEM], CACHE_MODELS["checkpoint"], restore_points=[[], []])
    assert sim.cached_ideal[1] == 95


def test_groups_split_where_neighbours_share_fewer_than_the_threshold() -> None:
    seqs = [[*SYSTEM, 1], [9] * 30, [*SYSTEM, 2], [*SYSTEM[:20], 5], [9] * 29 + [1]]
    groups = prefix_groups(seqs, min_shared=16)
    assert [(g.members, g.shared_tokens) for g in groups] == [([0, 2, 3], 20), ([1, 4], 29)]


def test_distribution_uses_nearest_rank_percentiles() -> None:
    d = distribution(list(range(1, 11)))
    assert (d["min"], d["p50"], d["p90"], d["max"], d["mean"]) == (1, 5, 9, 10, 5.5)
    assert distribution([])["p50"] == 0
