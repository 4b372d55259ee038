"""llama-server's host-memory prompt cache (``--cache-ram``) as the simulator sees it.

Entries are whole prompts (their block hashes), least recently used first, bounded in tokens.
As measured on the embedded engine (3 slots, one 640-token prefix): a prompt is *moved* into
the slot that loads it, not copied. After one request restored the prefix from the cache, a
third request with it sent 0.15 s later, into another slot, computed it all again. So a load
takes its entry out, and the prompt comes back only when its slot saves it again.

Saving follows the server: a prompt already contained in an entry is not saved twice, and
entries contained in the new prompt are dropped (the new one covers them).
"""

from __future__ import annotations

from collections import OrderedDict

from ttft.simulate.requests import SimRequest

# Entries are found through their first block; a hot system prompt gathers many entries (one
# per tail), of which the most recent this many are searched, so a lookup stays cheap in a
# million-request run (16 cost it 25% of its speed). They share the prefix that matters;
# older ones only add other tails.
PER_HEAD = 4

Blocks = tuple[int, ...]


class PromptCache:
    def __init__(self, cap_tokens: int | None) -> None:
        self.cap = cap_tokens  # None: unbounded; 0: no cache
        self.entries: OrderedDict[Blocks, int] = OrderedDict()  # prompt -> tokens, LRU first
        self.tokens = 0
        self._by_head: dict[int, list[Blocks]] = {}

    def save(self, blocks: Blocks, tokens: int) -> None:
        if self.cap == 0 or not blocks:
            return
        if blocks in self.entries:
            self.entries.move_to_end(blocks)
            return
        bucket = self._by_head.setdefault(blocks[0], [])
        n = len(blocks)
        for entry in bucket:
            if len(entry) >= n and entry[:n] == blocks:
                self.entries.move_to_end(entry)  # already contained: refreshed, not copied
                return
        for entry in [e for e in bucket if len(e) < n and blocks[: len(e)] == e]:
            self._drop(entry)
        bucket = self._by_head.setdefault(blocks[0], [])
        bucket.append(blocks)
        self.entries[blocks] = tokens
        self.tokens += tokens
        if len(bucket) > PER_HEAD:
            self._drop(bucket[0])
        while self.cap is not None and self.tokens > self.cap and self.entries:
            self._drop(next(iter(self.entries)))

    def best(self, request: SimRequest) -> tuple[Blocks | None, int]:
        """The entry sharing the longest prefix with ``request``, and that prefix in tokens."""
        if not request.blocks:
            return None, 0
        found: Blocks | None = None
        longest = 0
        for entry in self._by_head.get(request.blocks[0], ()):
            shared = request.shared_prefix(entry)
            if shared > longest:
                found, longest = entry, shared
        return found, longest

    def take(self, entry: Blocks) -> None:
        """The entry is loaded into a slot: it leaves the cache."""
        self._drop(entry)

    def _drop(self, entry: Blocks) -> None:
        size = self.entries.pop(entry, None)
        if size is None:
            return
        self.tokens -= size
        bucket = self._by_head[entry[0]]
        bucket.remove(entry)
        if not bucket:
            del self._by_head[entry[0]]
