"""Prompt lint: dynamic content in the prefix, prefix-cache models, token and template checks."""
