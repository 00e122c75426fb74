#!/usr/bin/env python3
"""The closing-note table of issue 12 from bench/slo_sweep.sh's JSON lines (stdin or a file).

One row per (SLO admission on/off, multiple of capacity), all figures from that level's single
`loadtest` run: goodput (req/s within the SLO), SLO attainment (share of sent requests within it),
TTFT P50/P95/P99 of the admitted requests, 429 share and 429 latency P99, and the server's TTFT
prediction error P10/P50/P90 relative to the prediction with the share within +-25%.

  bench/slo_sweep.sh MODEL 1000 | tee sweep.jsonl; bench/slo_sweep_table.py sweep.jsonl
"""
import json
import sys


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    src = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
    cols = ("slo", "x cap", "req/s", "goodput", "attain", "ttft p50", "p95", "p99", "429 %", "429 p99",
            "err p10", "p50", "p90", "|err|<=25%")
    print("  ".join(f"{c:>9}" for c in cols))
    for line in src:
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        lv = row["level"]
        ttft = lv["ttft_ms"]
        rel = lv.get("ttft_prediction_error_rel", {})
        cells = (row["slo_admission"], fmt(row["multiple"], "g"), fmt(lv.get("request_rate"), ".2f"),
                 fmt(lv["goodput"], ".2f"), fmt(lv.get("slo_attainment"), ".2f"), fmt(ttft["p50"], ".0f"),
                 fmt(ttft["p95"], ".0f"), fmt(ttft["p99"], ".0f"), fmt(100 * lv["rejected_429_share"], ".1f"),
                 fmt(lv["rejected_429_e2e_ms"]["p99"], ".1f"), fmt(rel.get("p10"), "+.2f"),
                 fmt(rel.get("p50"), "+.2f"), fmt(rel.get("p90"), "+.2f"), fmt(rel.get("within_25pct"), ".2f"))
        print("  ".join(f"{c:>9}" for c in cells))


if __name__ == "__main__":
    main()
