"""Who and where a command measures, as the user gave it: the typed target options.

``TargetOptions`` (``--url``, ``--model``, ``--api-key``, ``--metrics-url``, ``--engine``,
``--header``) and ``AccessOptions`` (``--api-key``, ``--header`` alone) are filled by the CLI's
shared decorators (``ttft.cli.target_options``) and read by the library's option types
(``ttft.load.bench_options``), so both sides agree on one shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttft.core.errors import TtftError
from ttft.core.target import Target


@dataclass(frozen=True)
class TargetOptions:
    url: str | None
    model: str | None
    api_key: str | None
    metrics_url: str | None
    engine_kind: str | None
    headers: tuple[str, ...] = ()

    def header_dict(self) -> dict[str, str]:
        return dict(parse_header(h) for h in self.headers)

    def target(self) -> Target | None:
        """The user's service as given (None: no --url, the embedded engine is meant)."""
        if not self.url:
            return None
        return Target(
            self.url,
            self.model,
            self.metrics_url,
            self.engine_kind,
            self.api_key,
            self.header_dict(),
        )


def parse_header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise TtftError(f"--header {text!r} is not 'Name: value'", "e.g. --header 'X-Team: infra'")
    return name.strip(), value.strip()


@dataclass(frozen=True)
class AccessOptions:
    """Who we are to a service: a bearer key and extra headers, sent with every request."""

    api_key: str | None
    headers: tuple[str, ...] = ()

    def header_dict(self) -> dict[str, str]:
        return dict(parse_header(h) for h in self.headers)
