"""``ttft tune``: trials of engine configurations, load searches under SLOs, and A/B chains."""
