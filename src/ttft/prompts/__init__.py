"""Prompt analysis shared by lint, doctor and the gateway.

The chat-template renderer, the dynamic-content detectors (timestamps, ids, session data), the
static-prefix structure of a chat request, and the request transform that moves dynamic content
after the static prefix. It sits just above ``workload`` and imports nothing from lint, doctor or
the gateway, so a runtime data path (the gateway) never depends on a static checker.
"""
