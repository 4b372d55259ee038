"""Proxies that ttft runs itself (nginx from a user's configuration)."""
