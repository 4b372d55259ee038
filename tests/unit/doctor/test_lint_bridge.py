"""Lint findings join the doctor's list with a cost tier by area; info notes stay out."""

from __future__ import annotations

from pathlib import Path

from ttft.core.findings import CostTier, Finding, Location, Severity, rank_by_cost
from ttft.doctor.lint_bridge import lint_findings, to_doctor

DATA = Path(__file__).parents[2] / "data" / "nginx"


def _finding(rule: str, severity: Severity = Severity.WARNING) -> Finding:
    return Finding(rule, severity, "t", "m", Location("f", 1), action="x")


def test_tiers_follow_the_area_of_the_rule() -> None:
    got = {
        f.rule: f.tier
        for f in to_doctor(
            [
                _finding("nginx/proxy-buffering"),
                _finding("engine/prefix-caching-off"),
                _finding("engine/kv-cache-dtype-fp8"),
                _finding("engine/max-num-seqs"),
            ],
            "x",
        )
    }
    assert got == {
        "nginx/proxy-buffering": CostTier.TRANSPORT,
        "engine/prefix-caching-off": CostTier.CACHE,
        "engine/kv-cache-dtype-fp8": CostTier.PRECISION,
        "engine/max-num-seqs": CostTier.SCHEDULING,
    }


def test_info_notes_do_not_become_findings() -> None:
    assert to_doctor([_finding("engine/unknown-flag", Severity.INFO)], "engine") == []


def test_a_bad_nginx_config_yields_transport_findings_ranked_first() -> None:
    found = rank_by_cost(lint_findings(DATA / "bad" / "nginx.conf", "vllm serve m --enforce-eager"))
    rules = [f.rule for f in found]
    assert any(r.startswith("nginx/") for r in rules)
    assert found[0].tier == CostTier.TRANSPORT


def test_a_clean_nginx_config_adds_no_warning() -> None:
    assert lint_findings(DATA / "clean" / "nginx.conf", None) == []
