"""A Target: where to send, in which API style, and where its metrics are."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
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

    @property
    def root(self) -> str:
        url = self.base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url


def discover_model(target: Target, timeout_s: float = 10.0) -> str:
    """The first model id from ``GET /v1/models``, for targets given without ``--model``."""
    req = urllib.request.Request(target.root + "/v1/models")
    if target.api_key:
        req.add_header("Authorization", f"Bearer {target.api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            data = json.loads(resp.read())
        return str(data["data"][0]["id"])
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise TtftError(
                f"{target.root} refused the request (HTTP {exc.code})", "pass --api-key"
            ) from None
        raise TtftError(
            f"{target.root}/v1/models answered HTTP {exc.code}", "pass --model explicitly"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise TtftError(
            f"cannot reach {target.root}: {getattr(exc, 'reason', exc)}",
            "check --url (is the server running and listening there?)",
        ) from None
    except (ValueError, KeyError, IndexError, TypeError):
        raise TtftError(
            f"{target.root}/v1/models did not list a model", "pass --model explicitly"
        ) from None


def context_limit(target: Target, timeout_s: float = 10.0) -> int | None:
    """Tokens one request may use, as the server reports it in ``GET /v1/models`` (vLLM's
    ``max_model_len``, llama-server's per-slot ``meta.n_ctx``); None when it does not say."""
    req = urllib.request.Request(target.root + "/v1/models")
    if target.api_key:
        req.add_header("Authorization", f"Bearer {target.api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            data = json.loads(resp.read())
        models = [m for m in data.get("data", []) if isinstance(m, dict)]
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return None
    chosen = next((m for m in models if m.get("id") == target.model), models[0] if models else None)
    if chosen is None:
        return None
    for value in (chosen.get("max_model_len"), (chosen.get("meta") or {}).get("n_ctx")):
        if isinstance(value, int) and value > 0:
            return value
    return None
