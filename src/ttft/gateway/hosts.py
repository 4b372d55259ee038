"""Which ``Host`` headers an open gateway (no API keys) answers: loopback names, and what the
configuration adds. A DNS-rebinding page reaches 127.0.0.1 under its own name; refusing names
we do not know makes the rebound request fail before it touches a model."""

from __future__ import annotations

from ttft.gateway.config import GatewayConfig

_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def host_name(header: str) -> str:
    """The name in a Host header, lower-cased, without the port or IPv6 brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        address, sep, rest = value[1:].partition("]")
        # Only ":port" may follow the brackets: "[::1]evil.example" is not loopback.
        if sep and (not rest or (rest[0] == ":" and rest[1:].isdigit())):
            return address
        return value
    name, sep, port = value.rpartition(":")
    return name if sep and port.isdigit() else value


def allowed_hosts(config: GatewayConfig) -> frozenset[str]:
    names = set(_LOOPBACK) | set(config.allowed_hosts)
    if config.host.lower() not in _WILDCARDS:
        names.add(config.host.lower())  # listening on a given address: that address is fine
    return frozenset(names)
