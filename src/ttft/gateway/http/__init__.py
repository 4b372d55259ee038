"""The gateway's HTTP/1.1 server, made to pass token streams through and to face a hostile
network: ``server`` (what connections share: counts, the body budget, the sweeper), ``conn``
(one client connection: framing, limits, timers), ``budget`` (the body budget between the two),
``wire`` (heads, parsed by llhttp), ``response`` (one response, written as it is produced) and
``limits`` (the file limit and a quiet accept log). It knows nothing of LLMs: the gateway gives
it a handler and a ``precheck`` run on each request head.
"""
