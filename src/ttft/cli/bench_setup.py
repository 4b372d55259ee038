"""Turning ``ttft bench`` options into library objects: profiles, lists, tokenizer, engine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.workload.tokenizer import Tokenizer


@dataclass(frozen=True)
class Profile:
    buckets: tuple[int, ...]
    concurrency: tuple[int, ...]
    requests: int
    note: str


PROFILES = {
    # The article's measurement setup (seed section 3.1).
    "article": Profile((512, 2400, 8000), (1, 8, 32), 200, "512/2400/8000 tokens x c=1/8/32"),
    # Small enough for the embedded 270M model on 2 CPU cores in about a minute.
    "quick": Profile((128, 512), (1, 4), 8, "128/512 tokens x c=1/4, 8 requests"),
}


def parse_int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise TtftError(
            f"{option} {text!r} is not a comma-separated list of whole numbers",
            f"e.g. {option} 512,2400,8000",
        ) from None
    if not values or any(v < 1 for v in values):
        raise TtftError(f"{option} needs numbers of at least 1, not {text!r}")
    return values


def parse_shared_prefix(text: str) -> tuple[int, int]:
    prefix, sep, suffix = text.partition(":")
    try:
        if not sep:
            raise ValueError
        values = (int(prefix), int(suffix))
    except ValueError:
        raise TtftError(
            f"--shared-prefix {text!r} is not P:S",
            "e.g. --shared-prefix 1200:64 (a 1200-token system prompt, 64-token questions)",
        ) from None
    if min(values) < 1:
        raise TtftError("--shared-prefix needs P and S of at least 1 token")
    return values


def make_tokenizer(path: Path | None, target: Target) -> Tokenizer:
    """A tokenizer.json or .gguf when given, else the server's own /tokenize (checked once here)."""
    if path is not None and path.suffix.lower() == ".gguf":
        from ttft.workload.gguf_tokenizer import GgufTokenizer

        return GgufTokenizer.from_gguf(path)
    if path is not None:
        from ttft.workload.hf_tokenizer import HFTokenizer

        return HFTokenizer.from_file(path)
    tokenizer = ServerTokenizer(target)
    try:
        tokenizer.encode("probe")
    except TtftError:
        raise TtftError(
            f"{target.root} offers no /tokenize endpoint, so prompt lengths cannot be exact",
            "pass --tokenizer path/to/tokenizer.json (the model's own), or --prompt-file",
        ) from None
    return tokenizer
