"""llama.cpp's llama-server: adapter (metrics, flags, rules, advice, tunables), launch argv checked
against the build's own --help, and the embedded engine (Gemma 3 270M)."""
