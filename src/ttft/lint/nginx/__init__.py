"""nginx configuration lint: the parsed config, the rule kit, and the rules.

Buffering, gzip on event streams, timeouts and upstream keep-alive: what holds a stream back.
"""
