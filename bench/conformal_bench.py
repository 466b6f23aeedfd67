#!/usr/bin/env python3
"""Split conformal quantiles on the embedded data: the README demo's model (or the sizes
given), trained, then `qtft evaluate --conformal split` on the test split: each level's
coverage, the central interval's and the loss, raw and with the offsets fitted on the
validation split.

    python3 bench/conformal_bench.py [--qtft build/qtft] [--epochs 3] [--hidden-size 32]
                                     [--max-batches-per-epoch N] [--json docs/results/conformal_split.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_record import command_line, cpu_name, finish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qtft", default=os.path.join(ROOT, "build", "qtft"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hidden-size", type=int, default=32)
    parser.add_argument("--max-batches-per-epoch", type=int, default=0, help="0: every batch")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="write the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qtft-conformal-bench-") as work:
        model, metrics = os.path.join(work, "demo.safetensors"), os.path.join(work, "metrics.json")
        train = [args.qtft, "train", "--epochs", str(args.epochs), "--hidden-size", str(args.hidden_size),
                 "--threads", str(args.threads), "--save-model", model]
        if args.max_batches_per_epoch:
            train += ["--max-batches-per-epoch", str(args.max_batches_per_epoch)]
        subprocess.run(train, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([args.qtft, "evaluate", "--load-model", model, "--conformal", "split", "--device", "cpu",
                        "--threads", str(args.threads), "--metrics-json", metrics], check=True, stdout=subprocess.DEVNULL)
        with open(metrics) as f:
            conformal = json.load(f)["conformal"]
    levels = conformal["levels"]
    print(f"test split, {conformal['windows']} windows; offsets from {conformal['calibration_windows']} validation windows")
    print(f"{'':<10}" + "".join(f"{'q' + format(q, 'g'):>9}" for q in levels) + f"{'interval':>10}{'loss':>10}")
    print(f"{'nominal':<10}" + "".join(f"{q:>9.3f}" for q in levels) + f"{conformal['nominal_interval']:>10.3f}")
    for name in ("raw", "conformal"):
        c = conformal[name]
        print(f"{name:<10}" + "".join(f"{v:>9.3f}" for v in c["coverage"]) + f"{c['interval_coverage']:>10.3f}"
              f"{c['loss']:>10.5f}")
    worst = max(abs(c - q) for c, q in zip(conformal["conformal"]["coverage"], levels))
    result = {"command": command_line("conformal_bench.py"), "cpu": cpu_name(), "epochs": args.epochs,
              "hidden_size": args.hidden_size, "conformal": conformal, "worst_level_gap": worst}
    finish(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
