"""Who reaches an engine, and when: the admission policy in one place.

``lanes`` (per replica: the in-flight cap, the short and long lanes, the reserve for short
requests, each client's share of the slots), ``shares`` (per client and model: how many requests
it may have queued or in flight) and ``slot_pins`` (llama-server: which slot each request takes).
To change the policy, start in ``lanes.Admission``; the proxy calls ``acquire`` and ``release``.
"""
