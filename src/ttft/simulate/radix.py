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


class Node:
    """One cached block: the tokens it holds, its parent, how many children and locks it has,
    and when a request last matched it."""

    __slots__ = ("access", "children", "gone", "key", "locks", "parent", "tokens")

    def __init__(self, key: int, tokens: int, parent: Node | None, locks: int = 0) -> None:
        self.key = key
        self.tokens = tokens
        self.parent = parent
        self.children = 0
        self.locks = locks
        self.access = 0.0
        self.gone = False  # evicted


class RadixPool:
    """``capacity`` KV tokens (None: never short), of which the tree holds some."""

    def __init__(self, capacity: int | None, page: int) -> None:
        self.capacity = capacity
        self.page = page
        self.free = capacity if capacity is not None else 1 << 60
        self.evictable = 0  # tokens in nodes nobody locks
        self.nodes: dict[int, Node] = {}  # block hash -> its node
        self._leaves: list[tuple[float, int, Node]] = []  # (access, tie, node), stale allowed
        self._tie = 0

    def ceil(self, tokens: int) -> int:
        """``tokens`` rounded up to whole pages."""
        return -(-tokens // self.page) * self.page

    def _push_leaf(self, node: Node) -> None:
        if self.capacity is None:
            return  # never short of KV: nothing is ever evicted
        self._tie += 1
        heapq.heappush(self._leaves, (node.access, self._tie, node))
        if len(self._leaves) > 4 * len(self.nodes) + 64:  # mostly stale entries: drop them
            self._leaves = [e for e in self._leaves if _current(e[0], e[2])]
            heapq.heapify(self._leaves)

    def evict(self, tokens: int) -> None:
        """Free ``tokens`` more by dropping unlocked leaves, least recently used first."""
        target = self.free + tokens
        while self.free < target and self._leaves:
            when, _, node = heapq.heappop(self._leaves)
            if not _current(when, node):
                continue  # stale entry: locked, grown a child or touched since
            del self.nodes[node.key]
            node.gone = True
            self.free += node.tokens
            self.evictable -= node.tokens
            parent = node.parent
            if parent is not None:
                parent.children -= 1
                if parent.children == 0 and parent.locks == 0:
                    self._push_leaf(parent)

    def alloc(self, tokens: int) -> bool:
        """Take ``tokens`` from the pool, evicting for them; False (nothing taken) if short."""
        if self.free < tokens:
            self.evict(tokens - self.free)
        if self.free < tokens:
            return False
        self.free -= tokens
        return True

    def cached(self, blocks: Sequence[int]) -> tuple[tuple[Node, ...], int]:
        """The leading nodes of ``blocks`` in the tree, and the tokens they hold."""
        found: list[Node] = []
        tokens = 0
        get = self.nodes.get
        for key in blocks:
            node = get(key)
            if node is None:
                break
            found.append(node)
            tokens += node.tokens
        return tuple(found), tokens

    def lock(self, nodes: Sequence[Node], now: float) -> int:
        """Lock ``nodes`` (a request uses them) and touch them; the tokens they hold."""
        held = 0
        for node in nodes:
            if node.locks == 0:
                self.evictable -= node.tokens
            node.locks += 1
            node.access = now
            held += node.tokens
        return held

    def unlock(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            node.locks -= 1
            if node.locks == 0:
                self.evictable += node.tokens
                if node.children == 0:
                    self._push_leaf(node)

    def insert(
        self, request: SimRequest, held: Sequence[Node], now: float, upto: int
    ) -> tuple[tuple[Node, ...], int]:
        """The request's blocks computed in its first ``upto`` tokens enter the tree after its
        ``held`` (locked) prefix; the nodes it now locks besides, and the tokens of its own KV
        they took over. A block someone else inserted meanwhile is used, and the copy computed
        here freed (``cache_unfinished_req`` / ``cache_finished_req``)."""
        blocks, size_of, prompt = request.blocks, request.block_tokens, request.prompt_tokens
        nodes = self.nodes
        parent = held[-1] if held else None
        added: list[Node] = []
        moved = 0
        for i in range(len(held), len(blocks)):  # ``held`` is the leading blocks
            start = i * size_of
            size = min(size_of, prompt - start)
            if size <= 0 or start + size > upto:
                break
            key = blocks[i]
            node = nodes.get(key)
            if node is not None:  # someone else's: locked, and the copy computed here freed
                self.free += size
                if node.locks == 0:
                    self.evictable -= node.tokens
                node.locks += 1
            else:  # a new node, locked by its request
                node = nodes[key] = Node(key, size, parent, 1)
                if parent is not None:
                    parent.children += 1
            node.access = now
            added.append(node)
            moved += size
            parent = node
        return tuple(added), moved


def _current(when: float, node: Node) -> bool:
    """An eviction entry still stands: an unlocked leaf in the tree, untouched since pushed."""
    return not node.gone and not node.locks and not node.children and node.access == when
