"""Data-parallel scaling of `qtft train` on this machine: training samples per second with
one rank and with two (`--nproc 2`), on the same data, configuration and cores.

    python3 bench/data_parallel_scaling.py [--qtft build/qtft] [--batches 30] [--validation-fraction F]
                                           [--json out.json]

Every run trains one epoch of --batches steps of the small benchmark configuration (encoder
64, horizon 8, hidden 64, 4 heads) on the embedded data; its figure is the epoch's training
throughput from --metrics-json (global windows per second, validation not included) and its
collective operations per training step. Rows: one rank on 1 and on all cores, two ranks
with the same global batch (B/2 each) and with twice the global batch (B each); FP32, QAT
with live observers (across ranks updated once per step, the default: all observers' min and
max in one collective), the same with --observer-update immediate (one collective per
observer and forward), and QAT with frozen observers. The summary sets each mode's ratio,
two ranks of one thread against one rank of all threads at the same global batch, against
FP32's. Run it on an otherwise idle machine.
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

MODEL = ["--encoder-length", "64", "--horizon", "8", "--hidden-size", "64", "--attention-heads", "4"]


def run(qtft, extra, batches, workdir, validation_fraction=None):
    metrics = os.path.join(workdir, "metrics.json")
    flags = ["train", *MODEL, "--epochs", "1", "--max-batches-per-epoch", str(batches), *extra]
    if validation_fraction is not None:
        flags += ["--validation-fraction", str(validation_fraction)]
    command = [qtft, *flags, "--metrics-json", metrics]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=workdir)
    wall = time.perf_counter() - start
    with open(metrics) as f:
        epoch = json.load(f)["epochs"][0]
    return {"command": " ".join(["qtft", *flags]),
            "samples_per_second": epoch["samples_per_second"], "epoch_seconds": epoch["seconds"],
            "collectives_per_step": epoch.get("collectives_per_step", 0), "wall_seconds": wall}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qtft", default="build/qtft")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--validation-fraction", type=float,
                        help="qtft's share of rows for validation (default: qtft's); small for a quick check")
    parser.add_argument("--json")
    args = parser.parse_args()
    qtft = os.path.abspath(args.qtft)
    cores = os.cpu_count()
    b, half = str(args.batch_size), str(args.batch_size // 2)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        qat = ["--use-qat", "--qat-calibration-batches", "10"]
        modes = [("FP32", []), ("QAT, live observers", qat),
                 ("QAT, live observers, immediate", qat + ["--observer-update", "immediate"]),
                 ("QAT, frozen observers", qat + ["--freeze-qat-observers"])]
        for mode, qat in modes:
            variants = [
                ("1 rank, 1 thread", ["--threads", "1", "--batch-size", b], args.batch_size),
                (f"1 rank, {cores} threads", ["--threads", str(cores), "--batch-size", b], args.batch_size),
                (f"2 ranks x 1 thread, {half} each", ["--nproc", "2", "--threads", "1", "--batch-size", half],
                 args.batch_size),
                (f"2 ranks x 1 thread, {b} each", ["--nproc", "2", "--threads", "1", "--batch-size", b],
                 2 * args.batch_size),
            ]
            for name, extra, global_batch in variants:
                row = run(qtft, extra + qat, args.batches, workdir, args.validation_fraction)
                row.update({"run": name, "mode": mode, "global_batch": global_batch})
                rows.append(row)
                print(f"{mode:31s} {name:32s} global batch {global_batch:4d}: "
                      f"{row['samples_per_second']:8.1f} samples/s, "
                      f"{row['collectives_per_step']:6.1f} collectives/step", flush=True)
    # Two ranks of one thread (B/2 each) against one rank of all threads, per mode.
    ratios = {}
    for mode in dict.fromkeys(r["mode"] for r in rows):
        one = next(r for r in rows if r["mode"] == mode and r["run"] == f"1 rank, {cores} threads")
        two = next(r for r in rows if r["mode"] == mode and r["run"] == f"2 ranks x 1 thread, {half} each")
        ratios[mode] = two["samples_per_second"] / one["samples_per_second"]
    summary = {mode: {"two_ranks_over_one": ratio, "against_fp32": ratio / ratios["FP32"]}
               for mode, ratio in ratios.items()}
    for mode, s in summary.items():
        print(f"{mode:31s} 2 ranks / 1 rank: {s['two_ranks_over_one']:.2f}x, "
              f"{s['against_fp32']:.2f} of FP32's ratio", flush=True)
    result = {"cores": cores, "batches": args.batches, "config": "small (encoder 64, horizon 8, hidden 64, 4 heads)",
              "runs": rows, "summary": summary}
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
