"""KV-cache quantization against f16 on the embedded engine, at fuller context lengths.

One f16 baseline run, then each candidate (q8_0, q4_0 by default), one engine at a time, on the
same regression set (``ttft.verify``): numeric recall at planted depths, greedy agreement over
``--tokens`` tokens, per-position top-k KL and top-1 agreement, TTFT p50 per side, a verdict per
length. The f16 baseline is compared with itself too, so the table carries its noise floor.

    python benchmarks/kv_quality.py                       # 1024,2048,4096; 4 probes per length
    python benchmarks/kv_quality.py --lengths 512,1024 --samples 2 --kv q4_0   # a quick look

On a 2-core machine prefill runs at ~100-450 tokens/s, so 4096 x 4 probes x 3 sides is ~5-10 min.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from ttft.report.verify import text_report
from ttft.verify import QualityOptions, build_probes, compare_sides, parse_side
from ttft.verify.collect import collect, count_tokens, open_side
from ttft.verify.probes import Probe
from ttft.verify.quality import Generation, QualityReport
from ttft.verify.run import check_windows, embedded_ctx_size


def _run(
    spec: str, options: QualityOptions, probes: list[Probe]
) -> tuple[list[Generation], list[Probe], float | None]:
    side = parse_side(spec)
    with open_side(
        side, ctx_size=embedded_ctx_size(options), parallel=1, threads=options.threads
    ) as end:
        if not probes:
            counter = count_tokens(end)
            assert counter is not None  # the embedded llama-server has /tokenize
            probes = build_probes(counter, options.lengths, options.samples)
        started = time.perf_counter()
        out = collect(end, probes, n_predict=options.n_tokens, n_probs=options.n_probs)
        print(
            f"{side.label}: {len(probes)} probes in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    return out, probes, end.kv_mib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="1024,2048,4096")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--kv", default="q8_0,q4_0", help="candidate KV types, comma separated")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    options = QualityOptions(
        lengths=tuple(sorted(int(x) for x in args.lengths.split(","))),
        samples=args.samples,
        n_tokens=args.tokens,
        threads=args.threads,
    )
    kinds = [k.strip() for k in args.kv.split(",") if k.strip()]
    specs = {k: f"embedded:-ctk={k},-ctv={k}" for k in ["f16", *kinds]}
    check_windows([parse_side(s) for s in specs.values()], options)
    base, probes, base_kv = _run(specs["f16"], options, [])
    again, _, again_kv = _run(specs["f16"], options, probes)
    reports: list[QualityReport] = []
    for kind, spec in specs.items():
        answers, _, kv = (again, probes, again_kv) if kind == "f16" else _run(spec, options, probes)
        report = compare_sides(
            probes,
            base,
            answers,
            baseline_label="f16 KV",
            candidate_label=f"{kind} KV",
            n_tokens=options.n_tokens,
        )
        reports.append(replace(report, kv_mib_baseline=base_kv, kv_mib_candidate=kv))
    print(
        "| KV | length | verdict | mean KL | top-1 | identical | recall f16/cand "
        "| TTFT p50 f16/cand ms | KV MiB f16/cand |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for report in reports:
        for s in report.lengths:
            kl = "n/a" if s.mean_kl is None else f"{s.mean_kl:.4f}"
            top1 = "n/a" if s.top1 is None else f"{s.top1:.0%}"
            print(
                f"| {report.candidate} | {s.length} | {s.verdict} | {kl} | {top1} | "
                f"{s.identical_share:.0%} | {s.recall_baseline:.0%}/{s.recall_candidate:.0%} | "
                f"{s.ttft_p50_baseline_ms:.0f}/{s.ttft_p50_candidate_ms:.0f} | "
                f"{report.kv_mib_baseline}/{report.kv_mib_candidate} |"
            )
    print()
    for report in reports:
        print(report.trade())
    print()
    print(text_report(reports[-1]), end="")


if __name__ == "__main__":
    main()
