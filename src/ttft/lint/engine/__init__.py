"""ttft.lint.engine."""
