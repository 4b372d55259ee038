"""Small Llama model folders vLLM can serve without downloading weights.

No weights can be fetched here, so a folder holds a config, a byte-level BPE tokenizer trained
locally on text that ships with Python (``pydoc_data``), and a chat template; vLLM serves it with
``--load-format dummy`` (random weights). Its scheduler, prefix cache, chunked prefill, KV cache
and metrics are all real; only the answers are gibberish. Two sizes (``SIZES``):

- ``ttft-tiny-llama`` (4 layers, hidden 256): starts fast and answers in milliseconds; its TTFT is
  almost all vLLM's front end (HTTP, tokenizing, the scheduler's Python), the right subject for
  tests of everything around the model;
- ``ttft-small-llama`` (8 layers, hidden 768, ~60M parameters): about 1 ms of compute per prompt
  token on two CPU cores, so a prompt's prefill outweighs the front end as it does on a real
  model; the subject for anything that fits or checks the engine's compute costs
  (``ttft simulate``'s accuracy on vLLM).

This file runs inside vLLM's own environment (it needs ``tokenizers``): ``ensure_model`` calls it
with that interpreter, so ttft's environment never imports ``tokenizers``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MODEL_NAME = "ttft-tiny-llama"
SMALL_MODEL_NAME = "ttft-small-llama"
# The shape of each size; the rest of the config is shared.
SIZES: dict[str, dict[str, int]] = {
    MODEL_NAME: {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    SMALL_MODEL_NAME: {
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 8,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
    },
}
VOCAB_SIZE = 8192
MAX_POSITIONS = 4096
SPECIALS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MARKER = "ttft-model.json"  # written last: a folder with it is complete
LAYOUT_VERSION = 1


def _config(name: str) -> dict[str, object]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **SIZES[name],
        "head_dim": 64,
        "vocab_size": VOCAB_SIZE,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": SPECIALS.index("<s>"),
        "eos_token_id": SPECIALS.index("</s>"),
        "torch_dtype": "float32",
    }


def _corpus() -> list[str]:
    """English prose that ships with every CPython: the help topics of pydoc."""
    from pydoc_data.topics import topics  # type: ignore[import-not-found,unused-ignore]

    texts = [str(t) for t in topics.values()]
    return [p for t in texts for p in t.split("\n\n") if p.strip()]


def _train_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    tok.save(str(out / "tokenizer.json"))


def build(out: Path, name: str = MODEL_NAME) -> Path:
    """Write the model folder of size ``name`` (run with vLLM's interpreter); returns it."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(_config(name), indent=2))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False})
    )
    _train_tokenizer(out)
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "</s>",
        "add_bos_token": True,
        "model_max_length": MAX_POSITIONS,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2))
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    )
    (out / MARKER).write_text(json.dumps({"name": name, "layout": LAYOUT_VERSION}))
    return out


def model_dir(home: Path, name: str = MODEL_NAME) -> Path:
    return home / "models" / name


def is_complete(path: Path) -> bool:
    try:
        marker = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("layout") == LAYOUT_VERSION


def ensure_model(python: Path, home: Path, name: str = MODEL_NAME) -> Path:
    """The model folder ``name`` under ``home``, built with vLLM's interpreter ``python`` if
    missing."""
    if name not in SIZES:
        raise ValueError(f"no local model {name!r}: choose one of {', '.join(SIZES)}")
    path = model_dir(home, name)
    if is_complete(path):
        return path
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(python), str(Path(__file__).resolve()), str(path), name],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0 or not is_complete(path):
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise RuntimeError(f"could not build the local vLLM model in {path}:\n{tail}")
    return path


if __name__ == "__main__":
    print(build(Path(sys.argv[1]), *sys.argv[2:3]))
