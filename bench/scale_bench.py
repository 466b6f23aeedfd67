"""Data at scale: what a partitioned Parquet dataset of growing size costs `qtft`, per size.

    python3 bench/scale_bench.py [--qtft build/qtft] [--sizes 1e6,1e7,5e7] [--with-200m]
                                 [--work DIR] [--json out.json]

For each size N (bars in all: N / 500k symbols of 500k one-minute bars, at least 2), in one run:
  - `qtft make-data --output DIR/ --bar-minutes 1`: a Hive-partitioned dataset
    (symbol=S/year=Y/part-0.parquet);
  - Arrow alone: pyarrow.dataset scanning every column of every file (one thread, as qtft
    reads), the floor for reading, timed after one untimed scan so that both it and
    prepare read from the page cache;
  - `qtft prepare`: time, bars/s, peak RSS, the store's size on disk;
  - `qtft train` (hidden 32, 50 steps of 64 windows, one epoch) from the store: peak RSS and
    the epoch's training samples/s; at the smallest size also with --no-feature-store (the
    in-memory path), for the samples/s and RSS side by side;
  - `qtft evaluate` of that model on the validation split: peak RSS;
  - `qtft train --nproc 2 --threads 1` (same 50 steps): each rank's peak private (anonymous)
    memory, sampled from /proc/PID/smaps_rollup, next to the machine's shared page cache.
Validation and test are 0.2% of each symbol's bars each, so that one epoch's validation
costs little at any size; windows are encoder 64, horizon 8. Peak RSS counts the pages of
the mapped store a process touched (file pages, shared, reclaimable), which is why the
per-rank anonymous figure is given too. Run it on an otherwise idle machine.
"""

import argparse
import json
import os
import subprocess
import sys
import time

WINDOWS = ["--encoder-length", "64", "--horizon", "8", "--validation-fraction", "0.002", "--test-fraction", "0.002"]
TRAIN = ["--hidden-size", "32", "--attention-heads", "4", "--epochs", "1", "--max-batches-per-epoch", "50",
         "--batch-size", "64", "--seed", "1"]
BARS_PER_SYMBOL = 500_000


def sampled_ranks(command, cwd):
    """Runs a --nproc launcher; returns the peak anonymous (private) memory of each worker."""
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ranks = {}
    while proc.poll() is None:
        for pid in children(proc.pid):
            ranks[pid] = max(ranks.get(pid, 0), anonymous_bytes(pid))
        time.sleep(0.05)
    err = proc.stderr.read()
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(command)}\n{err}")
    return sorted(ranks.values(), reverse=True)[:2]


def children(pid):
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def anonymous_bytes(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_rss(command, cwd):
    """Wall seconds, stdout, stderr and peak RSS in bytes of one command, through wait4."""
    start = time.perf_counter()
    with open(os.path.join(cwd, "out.txt"), "w") as out, open(os.path.join(cwd, "err.txt"), "w") as err:
        pid = os.posix_spawn(command[0], command, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    text = open(os.path.join(cwd, "out.txt")).read()
    errors = open(os.path.join(cwd, "err.txt")).read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}\n{errors}")
    return wall, text, errors, usage.ru_maxrss * 1024


def arrow_scan_seconds(folder):
    import pyarrow.dataset as ds
    dataset = ds.dataset(folder, format="parquet", partitioning="hive")
    start = time.perf_counter()
    rows = sum(batch.num_rows for batch in dataset.to_batches(use_threads=False))
    return time.perf_counter() - start, rows


def store_bytes(folder):
    store = os.path.join(folder, "_qtft_store")
    return sum(os.path.getsize(os.path.join(store, f)) for f in os.listdir(store) if f.endswith(".qtfs"))


def epoch_rate(metrics):
    with open(metrics) as f:
        return json.load(f)["epochs"][0]["samples_per_second"]


def measure_size(qtft, rows, work, in_memory_too):
    symbols = max(2, rows // BARS_PER_SYMBOL)
    folder = os.path.join(work, f"bars-{rows}") + "/"
    if not os.path.exists(folder):
        subprocess.run([qtft, "make-data", "--output", folder, "--rows", str(rows), "--symbols", str(symbols),
                        "--bar-minutes", "1"], check=True, stdout=subprocess.DEVNULL)
    store = os.path.join(folder, "_qtft_store")
    if os.path.exists(store):
        for f in os.listdir(store):
            os.remove(os.path.join(store, f))
    arrow_scan_seconds(folder)  # warm the page cache for both readers
    arrow_seconds, arrow_rows = arrow_scan_seconds(folder)
    assert arrow_rows == rows, (arrow_rows, rows)

    row = {"rows": rows, "symbols": symbols, "arrow_scan_seconds": arrow_seconds}
    prepare = [qtft, "prepare", "--data", folder, *WINDOWS]
    row["prepare_seconds"], _, _, row["prepare_peak_rss"] = peak_rss(prepare, work)
    row["prepare_rows_per_second"] = rows / row["prepare_seconds"]
    row["prepare_over_arrow"] = row["prepare_seconds"] / arrow_seconds
    row["store_bytes"] = store_bytes(folder)

    model = os.path.join(work, "model.safetensors")
    metrics = os.path.join(work, "metrics.json")
    train = [qtft, "train", "--data", folder, *WINDOWS, *TRAIN, "--save-model", model, "--metrics-json", metrics]
    row["train_seconds"], _, _, row["train_peak_rss"] = peak_rss(train, work)
    row["train_samples_per_second"] = epoch_rate(metrics)
    if in_memory_too:
        memory = [qtft, "train", "--data", folder, "--no-feature-store", *WINDOWS, *TRAIN, "--metrics-json", metrics]
        row["in_memory_train_seconds"], _, _, row["in_memory_train_peak_rss"] = peak_rss(memory, work)
        row["in_memory_train_samples_per_second"] = epoch_rate(metrics)

    evaluate = [qtft, "evaluate", "--load-model", model, "--data", folder, "--split", "validation"]
    row["evaluate_seconds"], _, _, row["evaluate_peak_rss"] = peak_rss(evaluate, work)

    nproc = [qtft, "train", "--data", folder, *WINDOWS, *TRAIN, "--nproc", "2", "--threads", "1"]
    row["nproc2_rank_anonymous_bytes"] = sampled_ranks(nproc, work)
    return row


def gib(x):
    return f"{x / 2**30:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qtft", default="build/qtft")
    parser.add_argument("--sizes", default="1e6,1e7,5e7")
    parser.add_argument("--with-200m", action="store_true", help="also 200M rows (400 symbols; ~40 GB of disk)")
    parser.add_argument("--work", default="build/scale_bench")
    parser.add_argument("--json")
    args = parser.parse_args()
    qtft = os.path.abspath(args.qtft)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    sizes = [int(float(s)) for s in args.sizes.split(",")] + ([200_000_000] if args.with_200m else [])
    config = {"cores": os.cpu_count(), "windows": WINDOWS, "train": TRAIN, "bars_per_symbol": BARS_PER_SYMBOL}
    print(f"qtft scale bench: {os.cpu_count()} cores; windows {' '.join(WINDOWS)}; train {' '.join(TRAIN)}")
    rows = []
    for i, n in enumerate(sizes):
        row = measure_size(qtft, n, work, in_memory_too=(i == 0))
        rows.append(row)
        ranks = " / ".join(gib(b) for b in row["nproc2_rank_anonymous_bytes"])
        print(f"{n:>11,} bars ({row['symbols']} symbols): prepare {row['prepare_seconds']:.1f} s "
              f"({row['prepare_rows_per_second'] / 1e6:.2f} M bars/s, {row['prepare_over_arrow']:.2f}x Arrow's scan of "
              f"{row['arrow_scan_seconds']:.1f} s), peak RSS GiB: prepare {gib(row['prepare_peak_rss'])}, "
              f"train {gib(row['train_peak_rss'])}, evaluate {gib(row['evaluate_peak_rss'])}; store "
              f"{gib(row['store_bytes'])} GiB; train {row['train_samples_per_second']:.0f} samples/s; "
              f"--nproc 2 anonymous per rank {ranks} GiB", flush=True)
        if "in_memory_train_peak_rss" in row:
            print(f"{'':>11}  in memory (--no-feature-store): train peak RSS {gib(row['in_memory_train_peak_rss'])} GiB, "
                  f"{row['in_memory_train_samples_per_second']:.0f} samples/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": config, "sizes": rows}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
