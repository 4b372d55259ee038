"""Routing: prefix keys, a consistent ring, the load bound, health, least-loaded fallback."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ttft.gateway.routing import HIT, NONE, SPILL, Ring, Router, affinity_key


@dataclass
class Fake:
    load: int = 0
    healthy: bool = True
    has_room: bool = True
    has_free_slot: bool = False  # the bound decides unless a test frees a slot


NAMES = ["http://a:1", "http://b:1", "http://c:1"]


def test_keys_hash_whole_leading_blocks_only() -> None:
    ids = list(range(200))
    key = affinity_key(ids, block=64, max_blocks=8, whole_if_short=False)
    # 200 tokens = 3 whole blocks: token 199 is not part of the key, token 150 is.
    assert key == affinity_key([*ids[:199], 7], 64, 8, whole_if_short=False)
    assert key != affinity_key([*ids[:150], 7, *ids[151:]], 64, 8, whole_if_short=False)
    # Past max_blocks nothing counts.
    assert affinity_key(ids, 64, 1, whole_if_short=False) == affinity_key(
        ids[:64] + [9] * 100, 64, 1, whole_if_short=False
    )


def test_short_material_has_a_key_only_when_it_is_a_whole_static_prefix() -> None:
    assert affinity_key("short system prompt", 64, 8, whole_if_short=False) is None
    assert affinity_key("short system prompt", 64, 8, whole_if_short=True) is not None
    assert affinity_key("", 64, 8, whole_if_short=True) is None


def test_text_blocks_are_four_characters_per_token() -> None:
    text = "x" * 256 + "tail"
    assert affinity_key(text, 64, 8, whole_if_short=False) == affinity_key(
        "x" * 256 + "other", 64, 8, whole_if_short=False
    )


def test_the_same_key_goes_to_the_same_replica_every_time() -> None:
    router = Router(NAMES)
    replicas = [Fake(), Fake(), Fake()]
    key = affinity_key("a long shared system prompt " * 20, 64, 8, whole_if_short=True)
    picks = {router.pick(replicas, key).index for _ in range(20)}  # type: ignore[union-attr]
    assert len(picks) == 1
    assert router.pick(replicas, key).affinity == HIT  # type: ignore[union-attr]


def test_keys_spread_over_replicas() -> None:
    router = Router(NAMES)
    replicas = [Fake(), Fake(), Fake()]
    owners = Counter(
        router.pick(replicas, affinity_key(f"prompt {i} " * 40, 64, 8, whole_if_short=True)).index
        for i in range(300)
    )
    assert set(owners) == {0, 1, 2} and min(owners.values()) > 50


def test_losing_a_replica_moves_only_the_keys_it_owned() -> None:
    keys = [affinity_key(f"p{i} " * 100, 64, 8, whole_if_short=True) for i in range(200)]
    ring = Ring(NAMES)
    before = {k: ring.walk(k)[0] for k in keys if k is not None}
    router = Router(NAMES)
    replicas = [Fake(), Fake(healthy=False), Fake()]
    for key, owner in before.items():
        choice = router.pick(replicas, key)
        assert choice is not None
        if owner != 1:
            assert choice.index == owner and choice.affinity == HIT
        else:
            assert choice.index != 1 and choice.affinity == HIT  # the next healthy one owns it now


def test_a_hot_key_spills_once_its_replica_is_over_the_load_bound() -> None:
    router = Router(NAMES, load_factor=1.25)
    key = 12345
    owner = router.ring.walk(key)[0]
    replicas = [Fake(), Fake(), Fake()]
    replicas[owner].load = 5  # bound = ceil(1.25 * (5 + 1) / 3) = 3
    choice = router.pick(replicas, key)
    assert choice is not None and choice.index != owner and choice.affinity == SPILL
    replicas[owner].load = 1  # bound = ceil(1.25 * 2 / 3) = 1: still over
    choice = router.pick(replicas, key)
    assert choice is not None and choice.index != owner
    replicas[owner].has_free_slot = True  # ...but a free slot means no queueing there
    choice = router.pick(replicas, key)
    assert choice is not None and choice.index == owner and choice.affinity == HIT
    replicas[owner].has_free_slot = False
    replicas[owner].load = 0
    choice = router.pick(replicas, key)
    assert choice is not None and choice.index == owner and choice.affinity == HIT


def test_no_key_means_least_loaded_and_ties_rotate() -> None:
    router = Router(NAMES)
    replicas = [Fake(load=3), Fake(load=1), Fake(load=1)]
    picks = [router.pick(replicas, None) for _ in range(4)]
    assert {p.index for p in picks if p} == {1, 2}
    assert all(p is not None and p.affinity == NONE for p in picks)


def test_nothing_is_picked_when_no_healthy_replica_has_room() -> None:
    router = Router(NAMES)
    replicas = [Fake(healthy=False), Fake(has_room=False), Fake(healthy=False)]
    assert router.pick(replicas, 1) is None
    assert router.pick([Fake(), Fake(), Fake()], 1, exclude=frozenset({0, 1, 2})) is None


def test_one_replica_is_picked_as_the_ring_would_pick_it() -> None:
    router = Router(NAMES[:1])
    for load in (0, 7, 1000):
        assert router.pick([Fake(load=load)], 12345) == router.pick([Fake(load=load)], 99)
        choice = router.pick([Fake(load=load)], 12345)
        assert choice is not None and (choice.index, choice.affinity) == (0, HIT)
    none = router.pick([Fake()], None)
    assert none is not None and (none.index, none.affinity) == (0, NONE)
    assert router.pick([Fake(healthy=False)], 1) is None
    assert router.pick([Fake(has_room=False)], None) is None
    assert router.pick([Fake()], 1, exclude=frozenset({0})) is None
