"""SGLang's KV token pool with its radix cache, for the SGLang model (``simulate/sglang.py``).

As read in sgl-project/sglang (main, newer than v0.5.3) ``mem_cache/radix_cache.py`` (006b0e3d,
``evict``, ``inc_lock_ref``, ``_match_prefix_helper``, ``cache_finished_req``): the KV of
a computed prompt stays in a prefix tree; a request locks the nodes of its matched prefix (a
lock holds every node up to the root); nodes nobody locks count as evictable, and eviction drops
unlocked leaves (a node whose children are gone becomes one) least recently used first, a match
touching every node on its path (``--radix-eviction-policy lru``, the default). KV is allocated
in pages of ``--page-size`` tokens (default 1).

Approximation: a node here is one of the request's hash blocks (``SimRequest.blocks``, each
hash standing for the whole prefix up to it), so a prefix matches in whole blocks of the
request's hashing (64 tokens for a synthetic mix, 512 for a Mooncake trace), not token by token:
two prompts that share 600 tokens in 64-token blocks share 576 here, where SGLang shares 600.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ttft.simulate.requests import SimRequest


class RadixPool:
    """``capacity`` KV tokens (None: never short), of which the tree holds some."""

    def __init__(self, capacity: int | None, page: int) -> None:
        self.capacity = capacity
        self.page = page
        self.free = capacity if capacity is not None else 1 << 60
        self.evictable = 0  # tokens in nodes nobody locks
        self.tokens: dict[int, int] = {}  # node -> tokens it holds
        self.parent: dict[int, int | None] = {}
        self.children: dict[int, int] = {}
        self.locks: dict[int, int] = {}
        self.access: dict[int, float] = {}
        self._leaves: list[tuple[float, int, int]] = []  # (access, tie, node), stale allowed
        self._tie = 0

    def ceil(self, tokens: int) -> int:
        """``tokens`` rounded up to whole pages."""
        return -(-tokens // self.page) * self.page

    def _push_leaf(self, node: int) -> None:
        if self.capacity is None:
            return  # never short of KV: nothing is ever evicted
        self._tie += 1
        heapq.heappush(self._leaves, (self.access[node], self._tie, node))
        if len(self._leaves) > 4 * len(self.tokens) + 64:  # mostly stale entries: drop them
            self._leaves = [e for e in self._leaves if self._current(e[0], e[2])]
            heapq.heapify(self._leaves)

    def _current(self, when: float, node: int) -> bool:
        """An eviction entry still stands: an unlocked leaf untouched since it was pushed."""
        return (
            node in self.tokens
            and not self.locks[node]
            and not self.children[node]
            and self.access[node] == when
        )

    def evict(self, tokens: int) -> None:
        """Free ``tokens`` more by dropping unlocked leaves, least recently used first."""
        target = self.free + tokens
        while self.free < target and self._leaves:
            when, _, node = heapq.heappop(self._leaves)
            if not self._current(when, node):
                continue  # stale entry: locked, grown a child or touched since
            size = self.tokens.pop(node)
            self.free += size
            self.evictable -= size
            parent = self.parent.pop(node)
            del self.children[node], self.locks[node], self.access[node]
            if parent is not None:
                self.children[parent] -= 1
                if self.children[parent] == 0 and self.locks[parent] == 0:
                    self._push_leaf(parent)

    def alloc(self, tokens: int) -> bool:
        """Take ``tokens`` from the pool, evicting for them; False (nothing taken) if short."""
        if self.free < tokens:
            self.evict(tokens - self.free)
        if self.free < tokens:
            return False
        self.free -= tokens
        return True

    def cached(self, blocks: Sequence[int]) -> tuple[tuple[int, ...], int]:
        """The leading nodes of ``blocks`` in the tree, and the tokens they hold."""
        nodes: list[int] = []
        tokens = 0
        for node in blocks:
            size = self.tokens.get(node)
            if size is None:
                break
            nodes.append(node)
            tokens += size
        return tuple(nodes), tokens

    def lock(self, nodes: Sequence[int], now: float) -> int:
        """Lock ``nodes`` (a request uses them) and touch them; the tokens they hold."""
        held = 0
        for node in nodes:
            if self.locks[node] == 0:
                self.evictable -= self.tokens[node]
            self.locks[node] += 1
            self.access[node] = now
            held += self.tokens[node]
        return held

    def unlock(self, nodes: Sequence[int]) -> None:
        for node in nodes:
            self.locks[node] -= 1
            if self.locks[node] == 0:
                self.evictable += self.tokens[node]
                if self.children[node] == 0:
                    self._push_leaf(node)

    def insert(
        self, request: SimRequest, held: Sequence[int], now: float, upto: int
    ) -> tuple[tuple[int, ...], int]:
        """The request's blocks computed in its first ``upto`` tokens enter the tree after its
        ``held`` (locked) prefix; the nodes it now locks besides, and the tokens of its own KV
        they took over. A block someone else inserted meanwhile is used, and the copy computed
        here freed (``cache_unfinished_req`` / ``cache_finished_req``)."""
        blocks, size_of, prompt = request.blocks, request.block_tokens, request.prompt_tokens
        tokens, locks, access, children = self.tokens, self.locks, self.access, self.children
        parent = held[-1] if held else None
        added: list[int] = []
        moved = 0
        for i in range(len(held), len(blocks)):  # ``held`` is the leading blocks
            start = i * size_of
            size = min(size_of, prompt - start)
            if size <= 0 or start + size > upto:
                break
            node = blocks[i]
            if node in tokens:  # someone else's: locked, and the copy computed here freed
                self.free += size
                if locks[node] == 0:
                    self.evictable -= tokens[node]
                locks[node] += 1
            else:  # a new node, locked by its request
                tokens[node] = size
                self.parent[node] = parent
                children[node] = 0
                locks[node] = 1
                if parent is not None:
                    children[parent] += 1
            access[node] = now
            added.append(node)
            moved += size
            parent = node
        return tuple(added), moved
