"""Deterministic filler text: the same (seed, index) always gives the same words.

Prompts of a bucket must be comparable between runs (fixed content) yet distinct from each other
from their first word, so one request never rides on another's prefix cache by accident.
"""

from __future__ import annotations

import random

# Plain English words: they tokenize to ~1.3 tokens each with common tokenizers and carry no
# markup that a chat template could treat specially.
_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no what "
    "up out about who them more some could into time only other new its then two may these "
    "first any way most over after also did many before must through back years where much your "
    "well down should because each just those people how too little state good very make world "
    "still own see men work long get here between both life being under never day same another "
    "know while last might us great old year off come since against go came right used take "
    "three states himself few house use during without again place around however home small "
    "found thought went say part once general high upon school every does got united left number "
    "course war until always away something fact though water less public put think almost hand "
    "enough far took head yet government system better set told nothing night end why called "
    "river garden music window market letter winter doctor engine harbor signal valley mirror"
).split()


def words(seed: str, count: int) -> list[str]:
    """``count`` words from a stream keyed by ``seed`` (stable across runs and platforms)."""
    rng = random.Random(seed)
    return [rng.choice(_WORDS) for _ in range(count)]


def sentence_text(seed: str, count: int) -> str:
    """Words grouped into sentences, so the text reads like prose rather than a word salad."""
    out: list[str] = []
    rng = random.Random(seed + "/shape")
    chunk: list[str] = []
    for word in words(seed, count):
        chunk.append(word)
        if len(chunk) >= rng.randint(8, 18):
            out.append(" ".join(chunk).capitalize() + ".")
            chunk = []
    if chunk:
        out.append(" ".join(chunk).capitalize() + ".")
    return " ".join(out)
