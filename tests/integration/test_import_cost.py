"""``import ttft`` stays cheap: it loads no layer until a name from it is used."""

from __future__ import annotations

import subprocess
import sys


def test_importing_ttft_loads_no_layer_eagerly() -> None:
    code = "import sys, ttft; print(sorted(m for m in sys.modules if m.startswith('ttft.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
