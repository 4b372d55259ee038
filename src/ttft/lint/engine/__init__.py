"""``ttft lint engine``: the rules every engine shares (through its flag roles) and the runner."""
