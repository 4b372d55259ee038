"""Does KV quantization hurt long-range recall more as the context grows? A closer look than
the mean KL over every generated token.

For each probe (``ttft.verify`` regression set: a number planted at a known depth, the prompt
ending "The code of room N is"), the tokens of the recalled number are the ones that depend on
attention back to the planted fact, possibly thousands of tokens away; the tokens after it
mostly depend on the last few. This prints, per context length, the mean KL (baseline f16 ||
candidate) over the recalled number's tokens only, the KL at the first generated token, and
the mean KL over all compared tokens, each with its bootstrap interval over probes.

    python benchmarks/kv_longrange.py --lengths 1024,2048,4096 --samples 4 --kv q4_0 --threads 2
"""

from __future__ import annotations

import argparse
import sys
import time

from ttft.verify import QualityOptions, build_probes, parse_side
from ttft.verify.collect import collect, count_tokens, open_side
from ttft.verify.metrics import compared_positions, mean, mean_interval, topk_kl
from ttft.verify.probes import Probe
from ttft.verify.quality import Generation
from ttft.verify.run import embedded_ctx_size


def _number_positions(probe: Probe, base: Generation) -> int:
    """How many leading baseline tokens it takes to write a number as long as the planted one
    (the recall, right or wrong)."""
    text = ""
    for i, piece in enumerate(base.pieces):
        text += piece
        if len(text.strip()) >= len(probe.expected):
            return i + 1
    return len(base.pieces)


def _run(
    spec: str, options: QualityOptions, probes: list[Probe]
) -> tuple[list[Generation], list[Probe]]:
    side = parse_side(spec)
    ctx = embedded_ctx_size(options)
    with open_side(side, ctx_size=ctx, parallel=1, threads=options.threads) as end:
        if not probes:
            counter = count_tokens(end)
            assert counter is not None
            probes = build_probes(counter, options.lengths, options.samples)
        started = time.perf_counter()
        out = collect(end, probes, n_predict=options.n_tokens, n_probs=options.n_probs)
        print(
            f"{side.label}: {len(probes)} probes in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    return out, probes


def _ci(values: list[float]) -> str:
    if not values:
        return "n/a"
    ci = mean_interval(values)
    return f"{mean(values):.4f} [{ci.low:.4f}, {ci.high:.4f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="1024,2048,4096")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--kv", default="q4_0")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    options = QualityOptions(
        lengths=tuple(sorted(int(x) for x in args.lengths.split(","))),
        samples=args.samples,
        n_tokens=args.tokens,
        threads=args.threads,
    )
    base, probes = _run("embedded:-ctk=f16,-ctv=f16", options, [])
    cand, _ = _run(f"embedded:-ctk={args.kv},-ctv={args.kv}", options, probes)
    head = "| length | n | KL over the number's tokens | KL at token 0 | KL over all compared |"
    print(f"{head} recall f16/{args.kv} |")
    print("| --- | --- | --- | --- | --- | --- |")
    for length in options.lengths:
        rows = [(p, b, c) for p, b, c in zip(probes, base, cand, strict=True) if p.length == length]
        number, first, every = [], [], []
        hits_b = hits_c = 0
        for p, b, c in rows:
            assert b.topk is not None and c.topk is not None
            k = min(compared_positions(b.tokens, c.tokens), len(b.topk), len(c.topk))
            per = [topk_kl(b.topk[i], c.topk[i]) for i in range(k)]
            first.append(per[0])
            every.append(mean(per))
            span = max(1, min(k, _number_positions(p, b)))
            number.append(mean(per[:span]))
            hits_b += b.text.lstrip().startswith(p.expected)
            hits_c += c.text.lstrip().startswith(p.expected)
        print(
            f"| {length} | {len(rows)} | {_ci(number)} | {_ci(first)} | {_ci(every)} | "
            f"{hits_b}/{len(rows)} / {hits_c}/{len(rows)} |"
        )


if __name__ == "__main__":
    main()
