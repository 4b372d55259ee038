"""The control client against a small llama-server stand-in: what it sends (paths, bodies, the
target's auth headers), what it reads back, and the errors it raises (naming the fix)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ttft.core.target import Target
from ttft.engines import control
from ttft.engines.control import ControlClient, ControlError, ServerTokenizer

KEY = "secret-key"


@dataclass
class FakeServer:
    """Answers like llama-server started with ``--api-key KEY`` (when ``key`` is set)."""

    key: str | None = KEY
    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)
    seen: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.seen.append((self.command, self.path, headers, body))
            if fake.key and headers.get("authorization") != f"Bearer {fake.key}":
                status, payload = 401, {"error": {"message": "Invalid API Key"}}
            else:
                status, payload = fake.answers.get(self.path, (404, {"error": "not found"}))
            raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:  # keep pytest's output clean
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def client(server: FakeServer, **target: Any) -> ControlClient:
    return ControlClient(Target(server.url + "/v1", **target))


def test_every_call_carries_the_key_and_the_targets_own_headers(server: FakeServer) -> None:
    server.answers["/props"] = (200, {"total_slots": 4, "chat_template": "{{ x }}"})
    props = client(server, api_key=KEY, headers={"X-Team": "ttft"}).props()
    assert props == {"total_slots": 4, "chat_template": "{{ x }}"}
    method, path, headers, body = server.seen[0]
    # a trailing /v1 on the URL is the OpenAI base; control endpoints live at the root
    assert (method, path, body) == ("GET", "/props", None)
    assert headers["authorization"] == f"Bearer {KEY}" and headers["x-team"] == "ttft"


def test_tokenize_sends_add_special_and_reads_plain_ids_or_pieces(server: FakeServer) -> None:
    server.answers["/tokenize"] = (200, {"tokens": [2, 17, 99]})
    assert client(server, api_key=KEY).tokenize("hello", add_special=True) == [2, 17, 99]
    assert server.seen[-1][0::3] == (
        "POST",
        {"content": "hello", "add_special": True, "prompt": "hello", "add_special_tokens": True},
    )
    server.answers["/tokenize"] = (200, {"tokens": [{"id": 17, "piece": "he"}, {"id": 5}]})
    assert client(server, api_key=KEY).tokenize("he", add_special=False) == [17, 5]
    assert server.seen[-1][3] == {
        "content": "he",
        "add_special": False,
        "prompt": "he",
        "add_special_tokens": False,
    }


def test_apply_template_returns_the_rendered_prompt(server: FakeServer) -> None:
    server.answers["/apply-template"] = (200, {"prompt": "<user>hi</user>"})
    messages = [{"role": "user", "content": "hi"}]
    assert client(server, api_key=KEY).apply_template(messages) == "<user>hi</user>"
    assert server.seen[-1][3] == {"messages": messages}


def test_an_engine_without_props_or_apply_template_answers_nothing(server: FakeServer) -> None:
    # vLLM, SGLang and TGI have neither endpoint: callers fall back, they do not fail
    ctl = client(server, api_key=KEY)
    assert ctl.props() == {}
    assert ctl.apply_template([{"role": "user", "content": "hi"}]) is None


def test_the_model_and_its_context_come_from_v1_models(server: FakeServer) -> None:
    models = [{"id": "other", "max_model_len": 2048}, {"id": "gemma", "meta": {"n_ctx": 4096}}]
    server.answers["/v1/models"] = (200, {"object": "list", "data": models})
    assert client(server, api_key=KEY).model_id() == "other"
    assert client(server, api_key=KEY, model="gemma").context_limit() == 4096
    assert client(server, api_key=KEY, model="unknown").context_limit() == 2048


def test_no_model_listed_says_to_pass_model(server: FakeServer) -> None:
    server.answers["/v1/models"] = (200, {"data": []})
    with pytest.raises(ControlError) as err:
        client(server, api_key=KEY).model_id()
    assert err.value.fix == "pass --model"


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.props(),
        lambda c: c.tokenize("x", add_special=False),
        lambda c: c.apply_template([{"role": "user", "content": "x"}]),
        lambda c: c.model_id(),
    ],
    ids=["props", "tokenize", "apply-template", "models"],
)
def test_a_refused_call_without_a_key_says_to_pass_one(server: FakeServer, call: Any) -> None:
    # the lenient calls (props, apply-template) still raise: a refusal is not "no such endpoint"
    with pytest.raises(ControlError) as err:
        call(client(server))
    assert err.value.status == 401
    assert err.value.fix == "the server wants an API key: pass --api-key"


def test_a_wrong_key_is_named_as_refused(server: FakeServer) -> None:
    with pytest.raises(ControlError) as err:
        client(server, api_key="wrong").model_id()
    assert err.value.fix == "the key given with --api-key was refused: check it"


def test_an_unreachable_server_says_to_check_the_url() -> None:
    with pytest.raises(ControlError) as err:
        ControlClient(Target("http://127.0.0.1:9"), timeout_s=2).model_id()
    assert err.value.fix is not None and "--url" in err.value.fix


def test_an_answer_that_is_not_json_is_a_clear_error(server: FakeServer) -> None:
    server.answers["/v1/models"] = (200, b"<html>proxy error</html>")
    with pytest.raises(ControlError, match="did not answer JSON"):
        client(server, api_key=KEY).models()


def test_the_server_tokenizer_encodes_without_special_tokens(server: FakeServer) -> None:
    server.answers["/tokenize"] = (200, {"tokens": [7, 8]})
    server.answers["/detokenize"] = (200, {"content": "ab"})
    tok = ServerTokenizer(Target(server.url, api_key=KEY))
    assert tok.encode("ab") == [7, 8] and tok.decode([7, 8]) == "ab"
    assert server.seen[0][3] == {
        "content": "ab",
        "add_special": False,
        "prompt": "ab",
        "add_special_tokens": False,
    }
    assert server.seen[1][3] == {"tokens": [7, 8]}


def test_a_server_without_tokenize_is_named_with_the_alternative(server: FakeServer) -> None:
    with pytest.raises(ControlError) as err:
        ServerTokenizer(Target(server.url, api_key=KEY)).encode("ab")
    assert "/tokenize" in err.value.problem
    assert err.value.fix is not None and "tokenizer.json" in err.value.fix


def test_calls_are_data_the_gateway_sends_over_its_own_connections() -> None:
    assert control.tokenize("a", add_special=True) == control.Call(
        "POST",
        "/tokenize",
        {"content": "a", "add_special": True, "prompt": "a", "add_special_tokens": True},
    )
    assert (control.PROPS.method, control.PROPS.path) == ("GET", "/props")
    assert control.HEALTH.path == "/health" and control.MODELS.path == "/v1/models"
    assert control.tokens_of({"tokens": [{"id": 3}, 4]}) == [3, 4]
    assert control.tokens_of({"error": "x"}) is None
    assert control.prompt_of({"prompt": "p"}) == "p" and control.prompt_of({}) is None
