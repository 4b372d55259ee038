"""Records, statistics, units and schemas: pure, no I/O."""
