"""vLLM: adapter, flag table, its own lint rules, metric names."""
