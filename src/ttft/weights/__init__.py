"""Integrity of weight files (safetensors, GGUF, checksum manifests). Standalone.

Public entry points: :func:`verify` (everything `ttft weights verify` checks),
:func:`write_manifest`, and :func:`read_gguf` (GGUF metadata and tensor infos, for any layer that
wants a GGUF's chat template or vocabulary). Only the standard library is used.
"""

from ttft.weights.gguf import GgufFile, GgufFormatError, GgufTensor, GgufValueType, read_gguf
from ttft.weights.manifest import MANIFEST_NAME, write_manifest
from ttft.weights.problems import FileReport, VerifyReport, problem
from ttft.weights.verify import VerifyOptions, verify

__all__ = [
    "MANIFEST_NAME",
    "FileReport",
    "GgufFile",
    "GgufFormatError",
    "GgufTensor",
    "GgufValueType",
    "VerifyOptions",
    "VerifyReport",
    "problem",
    "read_gguf",
    "verify",
    "write_manifest",
]
