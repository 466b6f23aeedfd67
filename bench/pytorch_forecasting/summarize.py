"""The table of compare_throughput.sh: samples per second of each tool, every round, and the ratio of medians."""

import argparse
import json
import statistics
from pathlib import Path


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--configs", default="paper small", help="space-separated: paper small wide16 wide160")
    args = parser.parse_args()
    rows, summary = [], []
    print("| configuration | qtft samples/s | pytorch-forecasting samples/s | qtft / pytorch-forecasting |")
    print("| --- | --- | --- | --- |")
    for config in args.configs.split():
        qtft, pf = [], []
        for r in range(1, args.rounds + 1):
            q = json.loads((args.out / f"qtft_{config}_{r}.json").read_text())
            p = json.loads((args.out / f"pf_{config}_{r}.json").read_text())
            qtft.append(q["results"][0]["samples_per_second"])
            pf.append(p["samples_per_second"])
            rows.append({"config": config, "round": r, "qtft": q["results"][0], "pytorch_forecasting": p})
        ratio = statistics.median(qtft) / statistics.median(pf)
        summary.append({"config": config, "qtft_median": statistics.median(qtft),
                        "pytorch_forecasting_median": statistics.median(pf), "ratio": ratio})
        fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
        print(f"| {config} | {fmt(qtft)} | {fmt(pf)} | {ratio:.2f}x |")
    (args.out / "comparison.json").write_text(json.dumps({"summary": summary, "runs": rows}, indent=2) + "\n")
    print(f"(every round; ratio of the medians; JSON in {args.out / 'comparison.json'})")


if __name__ == "__main__":
    main()
