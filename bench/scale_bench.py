"""Data at scale: what a partitioned Parquet dataset of growing size costs `qtft`, per size.

    python3 bench/scale_bench.py [--qtft build/qtft] [--sizes 1e6,1e7,5e7] [--with-200m]
                                 [--bars-per-symbol 500000] [--rounds 5] [--work DIR] [--json out.json]
    python3 bench/scale_bench.py --wide 225 [--single-file] [--row-group-rows 1000000]
                                 [--delete-data] [--no-folder] [--no-train] [--sizes 1e7] [--json out.json]

For each size N (bars in all: N / 500k symbols of 500k one-minute bars, at least 2), in one run:
  - `qtft make-data --output DIR/ --bar-minutes 1`: a Hive-partitioned dataset
    (symbol=S/year=Y/part-0.parquet);
  - Arrow alone: the pinned pyarrow's dataset scanner reading every column of every file (one thread, as qtft
    reads), the floor for reading, timed after one untimed scan so that both it and
    prepare read from the page cache;
  - `qtft prepare`: time, bars/s, peak RSS, the store's size on disk;
  - `qtft train` (hidden 32, 50 steps of 64 windows, one epoch) from the store: peak RSS and
    the epoch's training samples/s; at the smallest size also with --no-feature-store (the
    in-memory path), in 5 alternating rounds whose medians are compared;
  - `qtft evaluate` of that model on the validation split: peak RSS;
  - `qtft train --nproc 2 --threads 1` (same 50 steps): each rank's peak private (anonymous)
    memory, sampled from /proc/PID/smaps_rollup, next to the machine's shared page cache.
Validation and test are 0.2% of each symbol's bars each, so that one epoch's validation
costs little at any size; windows are encoder 64, horizon 8. Peak RSS counts the pages of
the mapped store a process touched (file pages, shared, reclaimable), which is why the
per-rank anonymous figure is given too. Run it on an otherwise idle machine.

With --wide K, per size instead, for K declared inputs (make-data's --extra-inputs K:
lead_signal and the noise columns f000.. as --observed, event_flag as --known, vol_class as
--static-categorical):
  - `qtft make-data --output DIR/ --bar-minutes 1 --extra-inputs K`, timed;
  - `qtft prepare` of the folder: time, peak RSS, peak anonymous memory, the store's size;
  - `qtft train` (hidden 32, 50 steps of 64 windows, one epoch, --threads 2) from that store:
    peak RSS, peak anonymous memory;
  - with --single-file, the same bars as one Parquet file (the folder's files in path order,
    with a symbol column, rewritten by the pinned pyarrow with --row-group-rows rows a row
    group, timed), and the same prepare and train of it, with its store in a folder of its own.
The folder's store is removed before the single file is written (disk); --delete-data
removes the bars and the stores once measured. --no-folder measures the single file only (the
folder is still made, to be rewritten); --no-train measures make-data and prepare only. Each
prepare's and train's memory also comes with the sample of its largest VmRSS split into RssAnon,
RssFile and RssShmem, and with a timeline of one /proc/PID/status sample a second.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

WINDOWS = ["--encoder-length", "64", "--horizon", "8", "--validation-fraction", "0.002", "--test-fraction", "0.002"]
TRAIN = ["--hidden-size", "32", "--attention-heads", "4", "--epochs", "1", "--max-batches-per-epoch", "50",
         "--batch-size", "64", "--seed", "1"]
BARS_PER_SYMBOL = 500_000  # --bars-per-symbol's default
ROUNDS = 5  # --rounds' default: alternating store / in-memory training runs at the smallest size


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


def status_fields(pid, fields=("VmRSS", "RssAnon", "RssFile", "RssShmem")):
    """Those fields of /proc/PID/status, in KiB (0 where unreadable)."""
    found = dict.fromkeys(fields, 0)
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name = line.split(":", 1)[0]
                if name in found:
                    found[name] = int(line.split()[1])
    except OSError:
        pass
    return found


def peak_rss(command, cwd, timeline=False):
    """Wall seconds and memory of one command: its peak RSS (wait4's ru_maxrss), and the
    peaks of its resident anonymous (private) and file-backed (mapped store, libraries)
    pages, sampled every 20 ms from /proc/PID/status; with the sample of the largest
    VmRSS split into its parts (at_peak, bytes); with timeline, also one sample a second
    (seconds, then VmRSS, RssAnon and RssFile in MiB)."""
    start = time.perf_counter()
    with open(os.path.join(cwd, "out.txt"), "w") as out, open(os.path.join(cwd, "err.txt"), "w") as err:
        pid = os.posix_spawn(command[0], command, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        anon = file = 0
        at_peak = {"VmRSS": 0}
        samples, next_sample = [], 0.0
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            sample = status_fields(pid)
            anon = max(anon, sample["RssAnon"])
            file = max(file, sample["RssFile"])
            now = time.perf_counter() - start
            if sample["VmRSS"] > at_peak["VmRSS"]:
                at_peak = dict(sample, seconds=round(now, 2))
            if timeline and now >= next_sample and sample["VmRSS"]:
                samples.append([round(now, 1)] + [sample[f] // 1024 for f in ("VmRSS", "RssAnon", "RssFile")])
                next_sample = now + 1.0
            time.sleep(0.02)
    wall = time.perf_counter() - start
    errors = open(os.path.join(cwd, "err.txt")).read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}\n{errors}")
    at_peak = {k: (v if k == "seconds" else v * 1024) for k, v in at_peak.items()}
    result = {"peak_rss": usage.ru_maxrss * 1024, "peak_anonymous": anon * 1024, "peak_file": file * 1024,
              "at_peak": at_peak}
    if timeline:
        result["timeline_mib"] = samples
    return wall, result


ARROW_SCAN = """
import sys, time
import pyarrow.dataset as ds
dataset = ds.dataset(sys.argv[1], format="parquet", partitioning="hive")
start = time.perf_counter()
rows = sum(batch.num_rows for batch in dataset.to_batches(use_threads=False))
print(time.perf_counter() - start, rows)
"""


def arrow_scan_seconds(python, folder):
    """Arrow alone (the pinned pyarrow wheel, the same libarrow qtft links), in a process of its own."""
    out = subprocess.run([python, "-c", ARROW_SCAN, folder], check=True, capture_output=True, text=True).stdout
    seconds, rows = out.split()
    return float(seconds), int(rows)


def venv_python(build):
    """The Python whose wheels the build links (QTFT_PYTHON in the CMake cache)."""
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("QTFT_PYTHON:"):
                return line.split("=", 1)[1].strip()
    sys.exit(f"no QTFT_PYTHON in {build}/CMakeCache.txt: pass --python")


def store_bytes(folder, store=None):
    store = store or os.path.join(folder, "_qtft_store")
    return sum(os.path.getsize(os.path.join(store, f)) for f in os.listdir(store) if f.endswith(".qtfs"))


def epoch_rate(metrics):
    with open(metrics) as f:
        return json.load(f)["epochs"][0]["samples_per_second"]


def measure_size(qtft, python, rows, work, in_memory_too, bars_per_symbol=BARS_PER_SYMBOL, rounds=ROUNDS):
    symbols = max(2, rows // bars_per_symbol)
    folder = os.path.join(work, f"bars-{rows}") + "/"
    if not os.path.exists(folder):
        subprocess.run([qtft, "make-data", "--output", folder, "--rows", str(rows), "--symbols", str(symbols),
                        "--bar-minutes", "1"], check=True, stdout=subprocess.DEVNULL)
    store = os.path.join(folder, "_qtft_store")
    if os.path.exists(store):
        for f in os.listdir(store):
            os.remove(os.path.join(store, f))
    arrow_scan_seconds(python, folder)  # warm the page cache for both readers
    arrow_seconds, arrow_rows = arrow_scan_seconds(python, folder)
    assert arrow_rows == rows, (arrow_rows, rows)

    row = {"rows": rows, "symbols": symbols, "arrow_scan_seconds": arrow_seconds}
    prepare = [qtft, "prepare", "--data", folder, *WINDOWS]
    row["prepare_seconds"], row["prepare_memory"] = peak_rss(prepare, work)
    row["prepare_rows_per_second"] = rows / row["prepare_seconds"]
    row["prepare_over_arrow"] = row["prepare_seconds"] / arrow_seconds
    row["store_bytes"] = store_bytes(folder)

    model = os.path.join(work, "model.safetensors")
    metrics = os.path.join(work, "metrics.json")
    train = [qtft, "train", "--data", folder, *WINDOWS, *TRAIN, "--save-model", model, "--metrics-json", metrics]
    row["train_seconds"], row["train_memory"] = peak_rss(train, work)
    row["train_samples_per_second"] = epoch_rate(metrics)
    with open(metrics) as f:
        row["train_tracker_peak_bytes"] = json.load(f)["epochs"][0].get("peak_memory_bytes")
    if in_memory_too:
        # Side by side: rounds alternate the two paths, and the medians are compared, as this
        # VM's speed drifts by 10-25% from one run to the next.
        in_memory = [qtft, "train", "--data", folder, "--no-feature-store", *WINDOWS, *TRAIN, "--metrics-json", metrics]
        rates = {"store": [], "memory": []}
        for _ in range(rounds):
            peak_rss(train, work)
            rates["store"].append(epoch_rate(metrics))
            row["in_memory_train_seconds"], row["in_memory_train_memory"] = peak_rss(in_memory, work)
            rates["memory"].append(epoch_rate(metrics))
        row["store_samples_per_second_rounds"] = rates["store"]
        row["in_memory_samples_per_second_rounds"] = rates["memory"]
        row["train_samples_per_second"] = statistics.median(rates["store"])
        row["in_memory_train_samples_per_second"] = statistics.median(rates["memory"])

    evaluate = [qtft, "evaluate", "--load-model", model, "--data", folder, "--split", "validation"]
    row["evaluate_seconds"], row["evaluate_memory"] = peak_rss(evaluate, work)

    nproc = [qtft, "train", "--data", folder, *WINDOWS, *TRAIN, "--nproc", "2", "--threads", "1"]
    row["nproc2_rank_anonymous_bytes"] = sampled_ranks(nproc, work)
    return row


# At 225 inputs the model's activations, not the data, would set a training peak: a small
# model (hidden 8, batch 16, validation 64 windows a pass) leaves the data path to measure.
WIDE_TRAIN = ["--hidden-size", "8", "--attention-heads", "2", "--epochs", "1", "--max-batches-per-epoch", "50",
              "--batch-size", "16", "--eval-batch-size", "64", "--seed", "1", "--threads", "2"]

SINGLE_FILE = """
import os, sys, time
import pyarrow as pa
import pyarrow.parquet as pq
folder, out, group_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.perf_counter()
files = sorted(os.path.join(d, f) for d, _, names in os.walk(folder) for f in names if f.endswith(".parquet"))
writer, pending, rows, groups = None, [], 0, 0
def write(table):
    global groups
    writer.write_table(table, row_group_size=group_rows)
    groups += 1
for path in files:
    symbol = next(p.split("=", 1)[1] for p in path.split(os.sep) if p.startswith("symbol="))
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65536):
        table = pa.Table.from_batches([batch])
        table = table.add_column(1, "symbol", pa.repeat(pa.scalar(symbol, pa.string()), table.num_rows))
        if writer is None:
            writer = pq.ParquetWriter(out + ".tmp", table.schema, compression="snappy")
        pending.append(table)
        rows += table.num_rows
        while rows >= group_rows:
            table = pa.concat_tables(pending)
            write(table.slice(0, group_rows))
            pending, rows = [table.slice(group_rows)], table.num_rows - group_rows
if rows:
    write(pa.concat_tables(pending))
writer.close()
os.replace(out + ".tmp", out)
print(time.perf_counter() - start, pq.ParquetFile(out).metadata.num_row_groups, groups)
"""


def wide_inputs(k):
    """The declared inputs of make-data's --extra-inputs K (K >= 3): K of them."""
    return ["--observed", "lead_signal,f*", "--known", "event_flag", "--static-categorical", "vol_class"]


def clear_store(store):
    if os.path.exists(store):
        for f in os.listdir(store):
            os.remove(os.path.join(store, f))


def measure_wide_source(qtft, source, store, rows, inputs, work, train_too=True):
    """prepare, then (train_too) train from the store, of one source (a folder or a single file)."""
    clear_store(store)
    data = ["--data", source, "--feature-store", store, *inputs, *WINDOWS]
    row = {}
    row["prepare_seconds"], row["prepare_memory"] = peak_rss([qtft, "prepare", *data], work, timeline=True)
    row["prepare_rows_per_second"] = rows / row["prepare_seconds"]
    row["prepare_output"] = open(os.path.join(work, "out.txt")).read() + open(os.path.join(work, "err.txt")).read()
    row["store_bytes"] = store_bytes(None, store)
    if not train_too:
        return row
    metrics = os.path.join(work, "metrics.json")
    train = [qtft, "train", *data, *WIDE_TRAIN, "--metrics-json", metrics]
    row["train_seconds"], row["train_memory"] = peak_rss(train, work, timeline=True)
    row["train_samples_per_second"] = epoch_rate(metrics)
    with open(metrics) as f:
        row["train_tracker_peak_bytes"] = json.load(f)["epochs"][0].get("peak_memory_bytes")
    row["train_store_line"] = next((l for l in open(os.path.join(work, "err.txt")) if l.startswith("Feature store")), "")
    return row


def measure_wide(qtft, python, rows, work, k, single_file, group_rows, delete, folder_too=True, train_too=True,
                 bars_per_symbol=BARS_PER_SYMBOL):
    symbols = max(2, rows // bars_per_symbol)
    folder = os.path.join(work, f"wide{k}-{rows}") + "/"
    row = {"rows": rows, "symbols": symbols, "declared_inputs": k, "inputs": wide_inputs(k)}
    if not os.path.exists(folder):
        row["make_data_seconds"], row["make_data_memory"] = peak_rss(
            [qtft, "make-data", "--output", folder, "--rows", str(rows), "--symbols", str(symbols),
             "--bar-minutes", "1", "--extra-inputs", str(k)], work)
    row["folder_bytes"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(folder)
                              for f in names if f.endswith(".parquet"))
    store = os.path.join(folder, "_qtft_store")
    if folder_too:
        row["folder"] = measure_wide_source(qtft, folder, store, rows, wide_inputs(k), work, train_too)
        print_wide(row, "folder", row["folder"])
        shutil.rmtree(store)
    if single_file:
        path = os.path.join(work, f"wide{k}-{rows}-rg{group_rows}.parquet")
        out = subprocess.run([python, "-c", SINGLE_FILE, folder, path, str(group_rows)], check=True,
                             capture_output=True, text=True).stdout.split()
        row["single_file_write_seconds"], row["single_file_row_groups"] = float(out[0]), int(out[1])
        row["single_file_row_group_rows"] = group_rows
        row["single_file_bytes"] = os.path.getsize(path)
        if delete:
            shutil.rmtree(folder)
        store = os.path.join(work, f"wide{k}-{rows}-store")
        os.makedirs(store, exist_ok=True)
        row["single_file"] = measure_wide_source(qtft, path, store, rows, wide_inputs(k), work, train_too)
        print_wide(row, "single file", row["single_file"])
        shutil.rmtree(store)
        if delete:
            os.remove(path)
    if delete and os.path.exists(folder):
        shutil.rmtree(folder)
    return row


def print_wide(row, layout, m):
    made = f", make-data {row['make_data_seconds']:.0f} s" if "make_data_seconds" in row else ""
    written = (f", written in {row['single_file_write_seconds']:.0f} s as {row['single_file_row_groups']} row groups"
               f" of {row['single_file_row_group_rows']:,} rows, {gib(row['single_file_bytes'])} GiB"
               if layout == "single file" else f"{made}, {gib(row['folder_bytes'])} GiB of Parquet")
    print(f"{row['rows']:>11,} bars x {row['declared_inputs']} declared inputs ({row['symbols']} symbols), "
          f"{layout}{written}: prepare {m['prepare_seconds']:.1f} s ({m['prepare_rows_per_second'] / 1e6:.2f} M bars/s), "
          f"peak RSS GiB: prepare {memory(m['prepare_memory'])}"
          + (f", train {memory(m['train_memory'])}" if "train_memory" in m else "")
          + (f" (the tracker's peak {gib(m['train_tracker_peak_bytes'])})" if m.get("train_tracker_peak_bytes") else "")
          + f"; store {gib(m['store_bytes'])} GiB"
          + (f"; train {m['train_samples_per_second']:.0f} samples/s" if "train_memory" in m else ""), flush=True)


def gib(x):
    return f"{x / 2**30:.2f}"


def memory(m):
    text = f"{gib(m['peak_rss'])} ({gib(m['peak_anonymous'])} anon + {gib(m['peak_file'])} file"
    if m.get("at_peak", {}).get("VmRSS"):
        p = m["at_peak"]
        text += (f"; at the largest VmRSS, {gib(p['VmRSS'])} at {p['seconds']:.0f} s: {gib(p['RssAnon'])} anon"
                 f" + {gib(p['RssFile'])} file + {gib(p['RssShmem'])} shmem")
    return text + ")"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qtft", default="build/qtft")
    parser.add_argument("--sizes", default="1e6,1e7,5e7")
    parser.add_argument("--with-200m", action="store_true", help="also 200M rows (400 symbols; ~40 GB of disk)")
    parser.add_argument("--work", default="build/scale_bench")
    parser.add_argument("--python", help="Python with the pinned pyarrow (default: the build's QTFT_PYTHON)")
    parser.add_argument("--bars-per-symbol", type=int, default=BARS_PER_SYMBOL,
                        help="bars of each symbol (symbols: a size's bars over this, at least 2); small for a quick check")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help="alternating store / in-memory training runs at the smallest size")
    parser.add_argument("--json")
    parser.add_argument("--wide", type=int, metavar="K",
                        help="instead: K declared inputs (make-data --extra-inputs K, K >= 3), prepare and train only")
    parser.add_argument("--single-file", action="store_true", help="with --wide: also the bars as one Parquet file")
    parser.add_argument("--row-group-rows", type=int, default=1_000_000, help="with --single-file: rows a row group")
    parser.add_argument("--delete-data", action="store_true", help="with --wide: remove the bars once measured")
    parser.add_argument("--no-folder", action="store_true",
                        help="with --wide --single-file: measure the single file only (the folder is still made, to write it)")
    parser.add_argument("--no-train", action="store_true", help="with --wide: prepare only")
    args = parser.parse_args()
    qtft = os.path.abspath(args.qtft)
    python = args.python or venv_python(os.path.dirname(qtft))
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    sizes = [int(float(s)) for s in args.sizes.split(",")] + ([200_000_000] if args.with_200m else [])
    config = {"cores": os.cpu_count(), "windows": WINDOWS, "train": TRAIN, "bars_per_symbol": args.bars_per_symbol}
    if args.wide is not None:
        if args.wide < 3:
            sys.exit("--wide K needs K >= 3 (lead_signal, event_flag, vol_class, then noise columns)")
        config.update({"declared_inputs": args.wide, "inputs": wide_inputs(args.wide),
                       "row_group_rows": args.row_group_rows if args.single_file else None,
                       "folder": not args.no_folder, "train": WIDE_TRAIN if not args.no_train else None})
        print(f"qtft scale bench, {args.wide} declared inputs: {os.cpu_count()} cores; windows {' '.join(WINDOWS)}; "
              f"inputs {' '.join(wide_inputs(args.wide))}; "
              + ("no train" if args.no_train else f"train {' '.join(WIDE_TRAIN)}"), flush=True)
        if args.no_folder and not args.single_file:
            sys.exit("--no-folder needs --single-file")
        rows = [measure_wide(qtft, python, n, work, args.wide, args.single_file, args.row_group_rows,
                             args.delete_data, not args.no_folder, not args.no_train, args.bars_per_symbol)
                for n in sizes]
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"config": config, "wide": rows}, f, indent=2)
                f.write("\n")
        return
    print(f"qtft scale bench: {os.cpu_count()} cores; windows {' '.join(WINDOWS)}; train {' '.join(TRAIN)}")
    rows = []
    for i, n in enumerate(sizes):
        row = measure_size(qtft, python, n, work, (i == 0), args.bars_per_symbol, args.rounds)
        rows.append(row)
        ranks = " / ".join(gib(b) for b in row["nproc2_rank_anonymous_bytes"])
        print(f"{n:>11,} bars ({row['symbols']} symbols): prepare {row['prepare_seconds']:.1f} s "
              f"({row['prepare_rows_per_second'] / 1e6:.2f} M bars/s, {row['prepare_over_arrow']:.2f}x Arrow's scan of "
              f"{row['arrow_scan_seconds']:.1f} s), peak RSS GiB: prepare {memory(row['prepare_memory'])}, "
              f"train {memory(row['train_memory'])}, evaluate {memory(row['evaluate_memory'])}; store "
              f"{gib(row['store_bytes'])} GiB; train {row['train_samples_per_second']:.0f} samples/s; "
              f"--nproc 2 anonymous per rank {ranks} GiB", flush=True)
        if "in_memory_train_memory" in row:
            print(f"{'':>11}  in memory (--no-feature-store): train peak RSS {memory(row['in_memory_train_memory'])} GiB; "
                  f"median samples/s of {args.rounds} alternating rounds: store {row['train_samples_per_second']:.0f}, "
                  f"in memory {row['in_memory_train_samples_per_second']:.0f} "
                  f"({row['train_samples_per_second'] / row['in_memory_train_samples_per_second']:.3f}x)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": config, "sizes": rows}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
