"""Runs a workload against a target (when to send)."""
