"""What to send: prompts of exact token lengths, shared-prefix sets, request logs, arrivals."""
