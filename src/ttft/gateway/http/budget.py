"""The memory budget for request bodies, between the connections and the server.

A body reserves bytes of the budget as they arrive, never from its ``Content-Length``: a client
that declares 4 MiB and sends one byte holds one byte. The whole budget is shared by every
connection, and each client (its API key when the gateway has keys, else its address) may hold
at most ``per_client`` bytes of it, so one client cannot spend what the others need; one more
body from it is refused (503) while the others' bodies are still read.

What a body holds is kept until its request has been answered: its bytes are joined, parsed and
planned while the request runs. ``charge`` adds what the parsed body costs on top of its bytes.
"""

from __future__ import annotations

from ttft.gateway.errors import GatewayError


class BodyBudget:
    """Bytes held by request bodies: in all (``total``) and per client (``per_client``)."""

    __slots__ = ("_by_client", "held", "per_client", "refused", "total")

    def __init__(self, total: int, per_client: int = 0) -> None:
        self.total = total
        self.per_client = per_client  # 0: no share, only the total
        self.held = 0
        self.refused = 0
        self._by_client: dict[str, int] = {}

    def reserve(self, client: str, n: int) -> bool:
        """Hold ``n`` more bytes for ``client``; False (nothing held) when a limit is in the way."""
        if n <= 0:
            return True
        if self.held + n > self.total:
            self.refused += 1
            return False
        mine = self._by_client.get(client, 0)
        if self.per_client and mine + n > self.per_client:
            self.refused += 1
            return False
        self.held += n
        self._by_client[client] = mine + n
        return True

    def could_hold(self, client: str, n: int) -> bool:
        """Whether ``n`` more bytes for ``client`` would fit now (nothing is held)."""
        if self.held + n > self.total:
            return False
        return not self.per_client or self._by_client.get(client, 0) + n <= self.per_client

    def release(self, client: str, n: int) -> None:
        if n <= 0:
            return
        self.held -= n
        left = self._by_client.get(client, 0) - n
        if left > 0:
            self._by_client[client] = left
        else:
            self._by_client.pop(client, None)

    def holding(self, client: str) -> int:
        return self._by_client.get(client, 0)


def server_busy() -> GatewayError:
    return GatewayError(
        503,
        "the gateway is receiving too many request bodies at once; retry shortly",
        type="server_error",
        code="server_busy",
        headers=(("Retry-After", "1"),),
    )


def client_share(total: int, max_body_bytes: int) -> int:
    """A client's default share: a quarter of the budget, but room for one whole body at least."""
    return min(total, max(max_body_bytes, total // 4))


class BodyIntake:
    """One request body being received: its chunks, and the budget they hold for its client.

    What it holds stays held after the body is complete, until ``release`` (the request has
    been answered): the bytes are joined, parsed and planned while it runs.
    """

    __slots__ = ("_budget", "_charged", "_chunks", "client", "need", "reserved")

    def __init__(self, budget: BodyBudget, client: str, length: int) -> None:
        self._budget = budget
        self._chunks: list[bytes] = []
        self.client = client
        self.need = length  # bytes still to come
        self.reserved = 0
        self._charged = 0  # of ``reserved``: for the parsed body, not its bytes

    def take(self, data: bytes) -> int:
        """Take what of ``data`` belongs to the body; its length, or -1 when over budget."""
        taken = min(len(data), self.need)
        if not self._budget.reserve(self.client, taken):
            return -1
        self.reserved += taken
        self.need -= taken
        self._chunks.append(data if taken == len(data) else data[:taken])
        return taken

    def charge(self, n: int) -> bool:
        """Hold ``n`` more bytes for what the parsed body will cost; False when over a limit."""
        if not self._budget.reserve(self.client, n):
            return False
        self.reserved += max(0, n)
        self._charged += max(0, n)
        return True

    def uncharge(self) -> None:
        """The parsed body is gone (it went upstream): give back what it was charged."""
        if self._charged:
            self._budget.release(self.client, self._charged)
            self.reserved -= self._charged
            self._charged = 0

    def body(self) -> bytes:
        """The whole body, joined once."""
        chunks, self._chunks = self._chunks, []
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def release(self) -> None:
        self._chunks = []
        if self.reserved:
            self._budget.release(self.client, self.reserved)
            self.reserved = self._charged = 0


__all__ = ["BodyBudget", "BodyIntake", "client_share", "server_busy"]
