"""Records, statistics, units, SLOs, findings and targets: pure, no I/O."""
