"""/metrics scraped over HTTP after real traffic parses with Prometheus's own parser."""

from __future__ import annotations

from typing import Any

import httpx
from gateway_testkit import gateway_for, scripted
from prometheus_client.parser import text_string_to_metric_families


def test_metrics_after_traffic_parse_with_the_prometheus_parser(chat_body: dict[str, Any]) -> None:
    with scripted(first_token_delay_ms=1, n_tokens=2) as up, gateway_for([up.base_url]) as gw:
        for _ in range(2):
            assert httpx.post(gw.url + "/v1/chat/completions", json=chat_body).status_code == 200
        missing = httpx.post(gw.url + "/v1/chat/completions", json={**chat_body, "model": "x"})
        scrape = httpx.get(gw.url + "/metrics")
    assert missing.status_code == 404
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(scrape.text)}
    requests = {
        tuple(sorted(s.labels.items())): s.value for s in families["ttft_gateway_requests"].samples
    }
    assert requests[(("endpoint", "chat"), ("model", "m"), ("status", "200"))] == 2
    ttft = families["ttft_gateway_ttft_seconds"]
    counts = [s for s in ttft.samples if s.name == "ttft_gateway_ttft_seconds_count"]
    assert [(s.labels, s.value) for s in counts] == [({"model": "m", "lane": "short"}, 2.0)]
    in_flight = families["ttft_gateway_in_flight"].samples
    assert [s.value for s in in_flight] == [0.0]
    assert families["ttft_gateway_upstream_healthy"].samples[0].labels == {"upstream": up.base_url}


def test_one_worker_answers_worker_self_alike_and_the_query_keeps_the_key_rules(
    chat_body: dict[str, Any],
) -> None:
    key = {"Authorization": "Bearer sk-right"}
    with (
        scripted(first_token_delay_ms=1, n_tokens=2) as up,
        gateway_for([up.base_url], api_keys=["sk-right"]) as gw,
    ):
        answer = httpx.post(gw.url + "/v1/chat/completions", json=chat_body, headers=key)
        assert answer.status_code == 200
        merged = httpx.get(gw.url + "/metrics", headers=key)
        own = httpx.get(gw.url + "/metrics?worker=self", headers=key)
        keyless = httpx.get(gw.url + "/metrics?worker=self")
        wrong = httpx.get(gw.url + "/metrics?worker=1", headers=key)
    assert merged.status_code == own.status_code == 200
    assert merged.text == own.text  # one worker: no directory, its own metrics either way
    assert keyless.status_code == 401
    assert wrong.status_code == 400
