"""Fixtures the installed-command tests share with the unit tests of ``ttft lint prompts``."""

from tokenizer_testkit import build_tokenizer_json, model_dir  # noqa: F401 (fixtures)
