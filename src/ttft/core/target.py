"""A Target: where to send, who we are (auth headers), and where its metrics are. Pure data:
the control endpoints are reached through ``ttft.engines.control``."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ttft.core.errors import TtftError


@dataclass(frozen=True)
class Target:
    base_url: str  # server root, e.g. http://127.0.0.1:8080 (a trailing /v1 is accepted)
    model: str | None = None
    metrics_url: str | None = None
    engine_kind: str | None = None  # llamacpp / vllm / sglang / tgi; None: guess from metrics
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, url in (("url", self.base_url), ("metrics url", self.metrics_url)):
            if url is None:
                continue
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise TtftError(
                    f"the {name} {url!r} is not an http(s) URL",
                    "give the server's base URL, e.g. http://127.0.0.1:8080",
                )

    def auth_headers(self) -> dict[str, str]:
        """Headers every request to this target carries: its own, plus the API key."""
        out = dict(self.headers)
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out

    @property
    def root(self) -> str:
        url = self.base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url
