"""Which replica serves a request: prefix affinity with a load bound, least-loaded otherwise.

An engine's prefix cache only helps if requests that share a prefix land on the replica that
already holds its KV. The affinity key is a hash of the prompt's leading blocks (see
``affinity_key``); a consistent-hash ring maps it to a replica, so the same system prompt keeps
going to the same replica, and adding or losing a replica moves only the keys it owned.

A hot prefix must not bury one replica: with bounded loads (Mirrokni, Thorup and Zadimoghaddam,
2018) a replica takes a keyed request only while it has a free slot or its load (in flight +
queued) is below ``load_factor`` x the mean load (+1); otherwise the walk continues clockwise to
the next one. A request without a key goes to the least-loaded healthy replica.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

HIT = "hit"  # the key's own replica took it
SPILL = "spill"  # the key's replica was over the bound (or down): the next one took it
NONE = "none"  # no key: least-loaded


class Balanced(Protocol):
    """What routing needs to know about a replica."""

    @property
    def healthy(self) -> bool: ...

    @property
    def load(self) -> int: ...

    @property
    def has_room(self) -> bool: ...

    @property
    def has_free_slot(self) -> bool: ...


def _hash64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def affinity_key(
    material: str | Sequence[int], block: int, max_blocks: int, *, whole_if_short: bool
) -> int | None:
    """A hash of the leading whole blocks of ``material`` (token ids, or text).

    Token ids are taken ``block`` at a time; text ``4 * block`` characters at a time (about as
    many tokens). At most ``max_blocks`` blocks count. Material shorter than one block has a key
    only when ``whole_if_short`` (it is a complete static prefix, e.g. a short system prompt).
    """
    unit = block if not isinstance(material, str) else 4 * block
    n_blocks = min(max_blocks, len(material) // unit)
    if n_blocks == 0:
        if not whole_if_short or not material:
            return None
        used: str | Sequence[int] = material
    else:
        used = material[: n_blocks * unit]
    if isinstance(used, str):
        return _hash64(b"t" + used.encode("utf-8", "surrogatepass"))
    return _hash64(b"i" + array("q", used).tobytes())


@dataclass(frozen=True)
class Choice:
    index: int
    affinity: str  # HIT, SPILL or NONE


class Ring:
    """A consistent-hash ring over replica indexes, ``virtual_nodes`` points per replica."""

    def __init__(self, names: Sequence[str], virtual_nodes: int = 64) -> None:
        points: list[tuple[int, int]] = []
        for index, name in enumerate(names):
            for v in range(virtual_nodes):
                points.append((_hash64(f"{name}#{v}".encode()), index))
        points.sort()
        self._hashes = [h for h, _ in points]
        self._owners = [i for _, i in points]
        self.size = len(names)

    def walk(self, key: int) -> list[int]:
        """Replica indexes in ring order from ``key``'s position, each once."""
        start = bisect.bisect_left(self._hashes, key)
        seen: list[int] = []
        n = len(self._owners)
        for step in range(n):
            owner = self._owners[(start + step) % n]
            if owner not in seen:
                seen.append(owner)
                if len(seen) == self.size:
                    break
        return seen


class Router:
    """Picks a replica per request among ``replicas`` (indexes into that sequence)."""

    def __init__(
        self,
        names: Sequence[str],
        *,
        virtual_nodes: int = 64,
        load_factor: float = 1.25,
    ) -> None:
        self.ring = Ring(names, virtual_nodes)
        self.load_factor = load_factor
        self._rr = 0  # rotates ties among equally loaded replicas

    def pick(
        self, replicas: Sequence[Balanced], key: int | None, exclude: frozenset[int] = frozenset()
    ) -> Choice | None:
        """The replica for a request, or None when no healthy replica has room."""
        if len(replicas) == 1:
            # One replica (the common deployment): it is the key's own, and alone under any
            # bound, so the answer needs none of the ring walk below.
            only = replicas[0]
            if not (only.healthy and only.has_room) or 0 in exclude:
                return None
            return Choice(0, NONE if key is None else HIT)
        usable = [
            i for i, r in enumerate(replicas) if r.healthy and r.has_room and i not in exclude
        ]
        if not usable:
            return None
        if key is not None:
            total = sum(replicas[i].load for i in usable)
            bound = math.ceil(self.load_factor * (total + 1) / len(usable))
            order = self.ring.walk(key)
            # "hit" means the key's first healthy replica, whatever the others are doing.
            first = next((i for i in order if replicas[i].healthy and i not in exclude), None)
            for i in order:
                # A free slot means no queueing there: keep the affinity whatever the bound.
                if i in usable and (replicas[i].has_free_slot or replicas[i].load < bound):
                    return Choice(i, HIT if i == first else SPILL)
        return Choice(self._least_loaded(replicas, usable), NONE if key is None else SPILL)

    def _least_loaded(self, replicas: Sequence[Balanced], usable: list[int]) -> int:
        low = min(replicas[i].load for i in usable)
        ties = [i for i in usable if replicas[i].load == low]
        self._rr += 1
        return ties[self._rr % len(ties)]
