"""A real tokenizer.json in miniature, for tests that need the Rust ``tokenizers`` path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

_HF_SPECIAL = ["<unk>", "<bos>", "<|im_start|>", "<|im_end|>"]


def _build_tokenizer_json(path: Path, corpus: list[str]) -> Path:
    """A word-level tokenizer.json trained on ``corpus``, with ChatML special tokens."""
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=_HF_SPECIAL))
    tok.add_special_tokens(_HF_SPECIAL)
    tok.save(str(path))
    return path


@pytest.fixture
def build_tokenizer_json() -> Callable[[Path, list[str]], Path]:
    """Writes a word-level tokenizer.json trained on a corpus (a model's file, in miniature)."""
    return _build_tokenizer_json


DATA = Path(__file__).resolve().parents[1] / "data"
TIMESTAMP_FIRST_LOG = DATA / "requests" / "timestamp_first.jsonl"


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A model folder as on the Hub: tokenizer_config.json (ChatML template) and tokenizer.json."""
    lines = TIMESTAMP_FIRST_LOG.read_text().splitlines()
    _build_tokenizer_json(tmp_path / "tokenizer.json", [json.dumps(json.loads(x)) for x in lines])
    config = {
        "chat_template": (DATA / "templates" / "llama_server_chatml.jinja").read_text(),
        "bos_token": "<bos>",
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path
