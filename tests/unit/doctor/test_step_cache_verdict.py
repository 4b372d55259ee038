"""Doctor's prefix-cache verdict: the engine's own cached-token count decides; without one, the
repeats are judged against a fresh prompt of the same length measured beside them."""

from __future__ import annotations

from ttft.doctor.step_cache import TWICE_TOKENS, repeat_is_cached


def test_the_engines_count_of_cached_tokens_wins_over_any_timing() -> None:
    # a repeat that happened to be fast while the engine says nothing was reused: off
    assert not repeat_is_cached(0.0, t1=900.0, repeats=[300.0, 310.0], t_fresh=900.0)
    # whole blocks cached (512 of a ~620-token prompt) while timing noise hid the gain: on
    assert repeat_is_cached(512.0, t1=400.0, repeats=[390.0, 410.0], t_fresh=400.0)


def test_a_warm_up_in_the_first_request_is_not_taken_for_a_cache_hit() -> None:
    """The CI failure on a loaded machine: vLLM with prefix caching off, the first request slow
    from a warm-up, the repeats at the engine's normal speed. The fresh prompt of the same
    length is as fast as the repeats, so nothing was cached."""
    assert not repeat_is_cached(None, t1=1000.0, repeats=[500.0, 520.0], t_fresh=510.0)
    # the same repeats against the first request alone would have looked cached
    assert repeat_is_cached(None, t1=1000.0, repeats=[500.0, 520.0], t_fresh=None)


def test_repeats_far_below_a_fresh_prompt_are_a_working_cache() -> None:
    assert repeat_is_cached(None, t1=400.0, repeats=[40.0, 45.0], t_fresh=380.0)
    # one repeat failed: the other decides
    assert repeat_is_cached(None, t1=400.0, repeats=[40.0, None], t_fresh=380.0)


def test_a_hit_below_half_the_prompt_is_no_reuse() -> None:
    assert not repeat_is_cached(TWICE_TOKENS * 0.4, t1=400.0, repeats=[40.0], t_fresh=400.0)
