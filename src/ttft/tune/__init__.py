"""Sweeps and A/B experiments over engine and gateway settings."""
