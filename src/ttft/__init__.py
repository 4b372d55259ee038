"""ttft: find where time-to-first-token goes, and remove the part outside the weights."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
