"""What a fix costs, in the article's order of levers: the order plans and reports rank by.

Its own module because both a Finding and the Change it carries need it.
"""

from __future__ import annotations

import enum


class CostTier(enum.IntEnum):
    """What a fix costs, cheapest first (the article's order of levers)."""

    TRANSPORT = 1  # proxy and template settings: config only, no restart of the engine
    SCHEDULING = 2  # engine scheduling flags: a restart
    CACHE = 3  # prefix and KV cache: a restart, sometimes prompt changes
    PRECISION = 4  # KV precision, kernels, graphs: a restart plus a quality check

    @property
    def label(self) -> str:
        return {1: "transport/template", 2: "scheduling", 3: "cache", 4: "precision/kernels"}[
            self.value
        ]
