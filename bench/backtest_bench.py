"""Walk-forward backtests, measured: what refitting buys after a regime change, and what the
walk costs beyond the training it contains.

    python3 bench/backtest_bench.py regime [--qtft build/qtft] [--work DIR] [--json out.json]
                                           [--regime-rows 24000] [--shift 6000] [--initial 5000] [--step 1000]
    python3 bench/backtest_bench.py conformal [--qtft build/qtft] [--work DIR] [--json out.json]
                                           [--conformal-rates 0.05,0.1,0.2,0.4]
                                           [--conformal-methods adaptive,split] (and regime's data flags)
    python3 bench/backtest_bench.py cost   [--qtft build/qtft] [--work DIR] [--json out.json]
                                           [--rows 1000000] [--symbols 10] [--folds 20]
    python3 bench/backtest_bench.py memory [--qtft build/qtft] [--work DIR] [--json out.json]
                                           [--sizes 1e6,1e7,5e7] [--fixed-symbols N] [--fixed 5e6:100]
                                           [--batches 50] [--delete-data]

regime: `make-data --shift-after-bar` bars (2 symbols of 12,000 five-minute bars, volatility
doubled and a drift from bar 6,000), walked with the first fold trained on 5,000 bars and
steps of 1,000, once per --refit (none, update, full). Per fold it prints the quantile loss in
the target's units (comparable across refits: a full refit fits its own scaling), the
central interval's coverage and the median's IC; then the mean loss over the folds whose
forecasts all come after the shift, and update's and full's margin over none there.

conformal: the regime walk once per --refit none and update and per rate R of
--conformal-rates with `--conformal adaptive --conformal-rate R`: per fold the central interval's coverage and the quantile loss (target
units) of the raw quantiles and of the adaptive conformal ones; over the folds after the
shift, whether each conformal coverage lies within 0.80 +- 0.03 and the conformal loss
within 1% of the raw; over the whole walk, each level's conformal coverage against it. With
split among --conformal-methods, the same two walks with `--conformal split` (offsets each
fold's model fits on its own validation split, then fixed), reported alike under "split".

cost: --rows bars over --symbols symbols, the first half trains fold 0 (one epoch), then
--folds steps, each an update of one epoch on its new bars and the forecasts of every window
of the step. It prints the wall time of the whole backtest against the training it
contains (folds.json's training seconds, summed), and the peak RSS.

memory: per size N, a folder of N one-minute bars as SCALE.md makes them
(`make-data --output DIR/ --bar-minutes 1`, symbols of 500,000 bars, at least 2), walked
from its feature store: fold 0 trained through each symbol's bar 490,000 (the last 10,000
bars of each symbol are walked; fewer for smaller sizes), 4 folds of 2,500 bars, every
training capped at 50 batches of 64 (--max-batches-per-epoch 50, as SCALE.md's train), each
update one such epoch. It prints the backtest's wall time and peak RSS, and the bars and
windows forecast, per size, into the JSON's "memory". --fixed-symbols N keeps N symbols at
every size (each fold then forecasts the same windows, N x 2,500, whatever the history);
--fixed SIZE:N (repeatable) measures SIZE bars over N symbols too, in the same run, into
"fixed_symbols". --batches caps each training (default 50). --delete-data removes each
folder once measured. The JSON records the command that wrote it.

All run `qtft` with hidden size 16 and --threads (default 2). Run on an otherwise idle machine.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

def common_flags(threads):
    """The flags every backtest here runs with."""
    return ["--hidden-size", "16", "--threads", str(threads), "--cost-bps", "1"]


def run_backtest(qtft, output, args, threads):
    """Runs one backtest into a fresh `output`; returns its folds.json, wall seconds, peak RSS (KiB)."""
    shutil.rmtree(output, ignore_errors=True)
    command = [qtft, "backtest", *args, *common_flags(threads), "--output", output]
    print("$ " + " ".join(command), flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(os.path.join(output, "folds.json")) as f:
        record = json.load(f)
    # ru_maxrss of children is the largest so far: a later, smaller run reports the earlier peak.
    return record, wall, peak if peak > before else None


def regime(args):
    data = os.path.join(args.work, "regime.parquet")
    subprocess.run([args.qtft, "make-data", "--output", data, "--rows", str(args.regime_rows), "--symbols", "2",
                    "--shift-after-bar", str(args.shift)], check=True, stdout=subprocess.DEVNULL)
    walk = ["--parquet-file", data, "--initial-train-bars", str(args.initial), "--step", str(args.step),
            "--epochs", "3", "--update-epochs", "1"]
    results = {}
    for refit in ("none", "update", "full"):
        record, wall, _ = run_backtest(args.qtft, os.path.join(args.work, f"regime-{refit}"),
                                       walk + ["--refit", refit], args.threads)
        results[refit] = {
            "wall_seconds": wall,
            "folds": [{
                "fold": f["fold"],
                "loss": f["metrics"]["in_target_units"]["loss"],
                "coverage": f["desk"]["interval_coverage"],
                "ic": f["desk"]["ic_pooled"][0]["ic"],
                "train_seconds": f["training"]["seconds"],
            } for f in record["folds"]],
        }
    # Fold k forecasts from bar initial + k * step on: all after the shift from the first fold
    # that starts there.
    first_after = -(-(args.shift - args.initial) // args.step)
    print(f"\n{'fold':>4} " + " ".join(f"{r + ' loss':>12} {'cov':>6} {'IC':>7}" for r in results))
    for k in range(len(results["none"]["folds"])):
        cells = []
        for r in results:
            f = results[r]["folds"][k]
            cells.append(f"{f['loss']:12.6f} {f['coverage']:6.3f} {f['ic']:7.4f}")
        mark = " (after the shift)" if k >= first_after else ""
        print(f"{k:>4} " + " ".join(cells) + mark)
    after = {r: [f["loss"] for f in results[r]["folds"][first_after:]] for r in results}
    means = {r: sum(v) / len(v) for r, v in after.items()}
    summary = {"first_fold_after_shift": first_after, "mean_loss_after_shift": means}
    for r in ("update", "full"):
        summary[f"{r}_better_than_none"] = 1 - means[r] / means["none"]
        wins = sum(u < n for u, n in zip(after[r], after["none"]))
        summary[f"{r}_folds_better"] = f"{wins} of {len(after[r])}"
    print(f"\nmean loss over folds {first_after}..: " + ", ".join(f"{r} {m:.6f}" for r, m in means.items()))
    for r in ("update", "full"):
        print(f"{r} better than none by {100 * summary[f'{r}_better_than_none']:.1f}% "
              f"({summary[f'{r}_folds_better']} folds); wall {results[r]['wall_seconds']:.1f} s "
              f"(none {results['none']['wall_seconds']:.1f} s)")
    return {"regime": results, "summary": summary}


def conformal(args):
    data = os.path.join(args.work, "regime.parquet")
    subprocess.run([args.qtft, "make-data", "--output", data, "--rows", str(args.regime_rows), "--symbols", "2",
                    "--shift-after-bar", str(args.shift)], check=True, stdout=subprocess.DEVNULL)
    first_after = -(-(args.shift - args.initial) // args.step)
    methods = args.conformal_methods.split(",")
    result = {"first_fold_after_shift": first_after}
    if "adaptive" in methods:
        result["conformal"] = {rate: conformal_walks(args, data, float(rate), first_after)
                               for rate in args.conformal_rates.split(",")}
    if "split" in methods:
        # Split offsets, fitted by each fold's model on its validation split and then fixed:
        # what darts and neuralforecast offer, beside the adaptive ones.
        result["split"] = conformal_walks(args, data, None, first_after)
    if "adaptive" in methods:
        result["cost"] = conformal_cost(args, data)
    return result


def conformal_cost(args, data):
    """What adaptive conformal adds to a walk: the --refit none walk with and without it,
    alternately --repeats times; the medians of the folds' forecast seconds (where the
    offsets are applied and moved) and of the wall time."""
    walk = ["--parquet-file", data, "--initial-train-bars", str(args.initial), "--step", str(args.step),
            "--epochs", "3", "--refit", "none"]
    runs = {"plain": [], "conformal": []}
    for _ in range(args.repeats):
        for kind, extra in (("plain", []), ("conformal", ["--conformal", "adaptive"])):
            record, wall, _ = run_backtest(args.qtft, os.path.join(args.work, f"cost-{kind}"), walk + extra,
                                           args.threads)
            runs[kind].append({"wall_seconds": wall,
                               "forecast_seconds": sum(f["forecast_seconds"] for f in record["folds"]),
                               "conformal_seconds": sum(f.get("conformal", {}).get("seconds", 0.0)
                                                        for f in record["folds"])})
    median = lambda v: sorted(v)[len(v) // 2]
    out = {kind: {key: median([r[key] for r in rs]) for key in ("wall_seconds", "forecast_seconds")}
           for kind, rs in runs.items()}
    out["runs"] = runs
    out["forecast_ratio"] = out["conformal"]["forecast_seconds"] / out["plain"]["forecast_seconds"]
    out["wall_ratio"] = out["conformal"]["wall_seconds"] / out["plain"]["wall_seconds"]
    # Timed inside the walk (folds.json's conformal.seconds): the offsets' own work, against
    # the run's forecasting and wall time, free of the machine's swings between runs.
    own = [r["conformal_seconds"] for r in runs["conformal"]]
    out["conformal_seconds"] = median(own)
    out["conformal_share_of_forecasting"] = median([r["conformal_seconds"] / r["forecast_seconds"]
                                                    for r in runs["conformal"]])
    out["conformal_share_of_wall"] = median([r["conformal_seconds"] / r["wall_seconds"] for r in runs["conformal"]])
    print(f"\nadaptive conformal's cost (--refit none, medians of {args.repeats}): forecasting "
          f"{out['plain']['forecast_seconds']:.3f} s plain, {out['conformal']['forecast_seconds']:.3f} s conformal "
          f"(x{out['forecast_ratio']:.3f}); wall x{out['wall_ratio']:.3f}; timed inside the walk, the offsets took "
          f"{out['conformal_seconds']:.3f} s, {100 * out['conformal_share_of_forecasting']:.2f}% of forecasting and "
          f"{100 * out['conformal_share_of_wall']:.2f}% of the wall time")
    return out


def conformal_walks(args, data, rate, first_after):
    """The regime walk under --refit none and update with adaptive conformal quantiles at `rate`
    (None: split conformal quantiles)."""
    method = ["--conformal", "split"] if rate is None else ["--conformal", "adaptive", "--conformal-rate", str(rate)]
    walk = ["--parquet-file", data, "--initial-train-bars", str(args.initial), "--step", str(args.step),
            "--epochs", "3", "--update-epochs", "1"] + method
    results = {}
    for refit in ("none", "update"):
        record, wall, _ = run_backtest(args.qtft, os.path.join(args.work, f"conformal-{refit}"),
                                       walk + ["--refit", refit], args.threads)
        folds = []
        for f in record["folds"]:
            c = f["conformal"]
            folds.append({
                "fold": f["fold"], "after_shift": f["fold"] >= first_after, "outcomes": c["raw"]["outcomes"],
                "raw_coverage": c["raw"]["interval_coverage"], "conformal_coverage": c["conformal"]["interval_coverage"],
                "raw_loss": c["raw"]["loss_in_target_units"], "conformal_loss": c["conformal"]["loss_in_target_units"],
                "raw_levels": c["raw"]["coverage"], "conformal_levels": c["conformal"]["coverage"],
                "forecast_seconds": f["forecast_seconds"],
            })
        levels = [0.1, 0.5, 0.9]
        n = sum(f["outcomes"] for f in folds)
        walk_levels = {kind: [sum(f[f"{kind}_levels"][k] * f["outcomes"] for f in folds) / n
                              for k in range(len(levels))] for kind in ("raw", "conformal")}
        after = [f for f in folds if f["after_shift"]]
        raw_loss = sum(f["raw_loss"] * f["outcomes"] for f in after) / sum(f["outcomes"] for f in after)
        conformal_loss = sum(f["conformal_loss"] * f["outcomes"] for f in after) / sum(f["outcomes"] for f in after)
        results[refit] = {
            "wall_seconds": wall, "folds": folds, "levels": levels, "walk_coverage": walk_levels,
            "after_shift": {
                "raw_loss": raw_loss, "conformal_loss": conformal_loss,
                "conformal_loss_change": conformal_loss / raw_loss - 1,
                "every_fold_within_0.03": all(abs(f["conformal_coverage"] - 0.8) <= 0.03 for f in after),
                "worst_fold_coverage": min((f["conformal_coverage"] for f in after), key=lambda c: -abs(c - 0.8)),
            },
            "before_shift": {
                "raw_loss": sum(f["raw_loss"] * f["outcomes"] for f in folds if not f["after_shift"]) /
                max(1, sum(f["outcomes"] for f in folds if not f["after_shift"])),
                "conformal_loss": sum(f["conformal_loss"] * f["outcomes"] for f in folds if not f["after_shift"]) /
                max(1, sum(f["outcomes"] for f in folds if not f["after_shift"])),
            },
            "every_level_within_0.02": all(abs(c - l) <= 0.02 for c, l in zip(walk_levels["conformal"], levels)),
        }
        print(f"\n--refit {refit} {' '.join(method)}")
        print(f"{'fold':>4} {'raw cov':>8} {'conf cov':>9} {'raw loss':>12} {'conf loss':>12}")
        for f in folds:
            print(f"{f['fold']:>4} {f['raw_coverage']:8.3f} {f['conformal_coverage']:9.3f} {f['raw_loss']:12.4e} "
                  f"{f['conformal_loss']:12.4e}" + (" (after the shift)" if f["after_shift"] else ""))
        a = results[refit]["after_shift"]
        print(f"after the shift: loss {a['raw_loss']:.4e} raw, {a['conformal_loss']:.4e} conformal "
              f"({100 * a['conformal_loss_change']:+.2f}%); every fold within 0.80 +- 0.03: {a['every_fold_within_0.03']}")
        print("whole walk, per level: " + ", ".join(
            f"q{l}: raw {r:.3f} conformal {c:.3f}"
            for l, r, c in zip(levels, walk_levels["raw"], walk_levels["conformal"])))
    return results


def cost(args):
    data = os.path.join(args.work, f"cost-{args.rows}.parquet")
    if not os.path.exists(data):
        subprocess.run([args.qtft, "make-data", "--output", data, "--rows", str(args.rows), "--symbols",
                        str(args.symbols)], check=True, stdout=subprocess.DEVNULL)
    bars = args.rows // args.symbols
    initial = bars // 2
    step = (bars - initial) // args.folds
    record, wall, peak = run_backtest(args.qtft, os.path.join(args.work, "cost"), [
        "--parquet-file", data, "--initial-train-bars", str(initial), "--step", str(step), "--epochs", "1",
        "--update-epochs", "1", "--refit", "update", "--encoder-length", "32"], args.threads)
    folds = record["folds"]
    training = sum(f["training"]["seconds"] for f in folds)
    forecasting = sum(f["forecast_seconds"] for f in folds)
    updates = sum(f["training"]["seconds"] for f in folds[1:])
    result = {
        "rows": args.rows, "symbols": args.symbols, "folds": len(folds), "initial_bars": initial, "step": step,
        "wall_seconds": wall, "training_seconds": training, "update_seconds": updates,
        "forecast_seconds": forecasting, "wall_over_training": wall / training, "peak_rss_kib": peak,
        "windows_forecast": sum(f["windows"] for f in folds),
    }
    print(f"\n{len(folds)} folds over {args.rows} bars: wall {wall:.1f} s, training {training:.1f} s "
          f"(fold 0 {folds[0]['training']['seconds']:.1f} s, updates {updates:.1f} s), forecasting and "
          f"metrics {forecasting:.1f} s; wall / training = {wall / training:.3f}; peak RSS {peak / 1024:.0f} MiB")
    return {"cost": result}


def status_kib(pid):
    """VmRSS, RssAnon and RssFile of a running process, in KiB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return tuple(int(fields[k].split()[0]) for k in ("VmRSS", "RssAnon", "RssFile"))
    except (OSError, KeyError, ValueError):
        return None


def peak_rss_run(command):
    """Runs `command`; returns its wall seconds, its own peak RSS (wait4) and, from samples of
    /proc every 0.2 s, its peak anonymous memory and the file-backed pages (the mapped
    feature store, shared and reclaimable) at its largest sample, all in KiB."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak_anon, file_at_peak, largest = 0, 0, 0
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid != 0:
            child.returncode = os.waitstatus_to_exitcode(status)
            break
        sample = status_kib(child.pid)
        if sample:
            rss, anon, file_backed = sample
            peak_anon = max(peak_anon, anon)
            if rss > largest:
                largest, file_at_peak = rss, file_backed
        time.sleep(0.2)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        sys.exit(f"{' '.join(command)} failed with exit code {child.returncode}")
    return wall, usage.ru_maxrss, peak_anon, file_at_peak


def memory_row(args, n, symbols, fixed):
    """One backtest over a fresh walk of a folder of `n` one-minute bars over `symbols`."""
    per_symbol = n // symbols
    folder = os.path.join(args.work, f"minute-{n}" + (f"-{symbols}" if fixed else "")) + "/"
    if not os.path.exists(folder):
        subprocess.run([args.qtft, "make-data", "--output", folder, "--rows", str(n), "--symbols", str(symbols),
                        "--bar-minutes", "1"], check=True, stdout=subprocess.DEVNULL)
    output = os.path.join(args.work, f"walk-{n}-{symbols}")
    shutil.rmtree(output, ignore_errors=True)
    initial = per_symbol - 4 * 2500
    command = [args.qtft, "backtest", "--data", folder, "--initial-train-bars", str(initial), "--step", "2500",
               "--epochs", "1", "--update-epochs", "1", "--max-batches-per-epoch", str(args.batches),
               *common_flags(args.threads),
               "--output", output]
    print("$ " + " ".join(command), flush=True)
    wall, peak, anon, file_backed = peak_rss_run(command)
    with open(os.path.join(output, "folds.json")) as f:
        record = json.load(f)
    row = {"bars": n, "symbols": symbols, "folds": len(record["folds"]), "wall_seconds": wall,
           "peak_rss_mib": peak / 1024, "peak_anonymous_mib": anon / 1024,
           "file_backed_at_largest_sample_mib": file_backed / 1024,
           "windows_forecast": sum(f["windows"] for f in record["folds"]),
           "windows_per_fold": max(f["windows"] for f in record["folds"]),
           "training_seconds": sum(f["training"]["seconds"] for f in record["folds"]),
           "forecast_seconds": sum(f["forecast_seconds"] for f in record["folds"])}
    print(f"{n} bars ({symbols} symbols): {row['folds']} folds, {row['windows_forecast']} windows forecast, "
          f"wall {wall:.1f} s, peak RSS {row['peak_rss_mib']:.0f} MiB (anonymous at most "
          f"{row['peak_anonymous_mib']:.0f} MiB; {row['file_backed_at_largest_sample_mib']:.0f} MiB file-backed "
          "at the largest sample)", flush=True)
    if args.delete_data:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(output, ignore_errors=True)
    return row


def memory(args):
    rows = []
    for size in args.sizes.split(","):
        n = int(float(size))
        rows.append(memory_row(args, n, args.fixed_symbols or max(2, n // 500_000), bool(args.fixed_symbols)))
    fixed = []
    for spec in args.fixed:
        size, _, symbols = spec.partition(":")
        if not symbols:
            raise SystemExit(f"--fixed {spec}: give SIZE:SYMBOLS, such as 5e6:100")
        fixed.append(memory_row(args, int(float(size)), int(symbols), True))
    out = {"memory": rows}
    if fixed:
        out["fixed_symbols"] = fixed
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["regime", "conformal", "cost", "memory"])
    parser.add_argument("--qtft", default="build/qtft")
    parser.add_argument("--work", default="build/backtest-bench")
    parser.add_argument("--json")
    parser.add_argument("--threads", type=int, default=2, help="qtft's CPU threads in every backtest")
    parser.add_argument("--regime-rows", type=int, default=24000, help="regime: bars in all, over 2 symbols")
    parser.add_argument("--shift", type=int, default=6000)
    parser.add_argument("--initial", type=int, default=5000)
    parser.add_argument("--step", type=int, default=1000)
    parser.add_argument("--conformal-rates", default="0.05,0.1,0.2,0.4", help="conformal: the adaptive offsets' rates")
    parser.add_argument("--repeats", type=int, default=3, help="conformal: walks with and without, for its cost")
    parser.add_argument("--conformal-methods", default="adaptive,split",
                        help="conformal: adaptive (every rate, and its cost), split, or both")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--symbols", type=int, default=10)
    parser.add_argument("--folds", type=int, default=20)
    parser.add_argument("--sizes", default="1e6,1e7,5e7")
    parser.add_argument("--fixed-symbols", type=int, default=0,
                        help="memory: this many symbols at every size (default: one per 500,000 bars, at least 2)")
    parser.add_argument("--fixed", action="append", default=[], metavar="SIZE:SYMBOLS",
                        help="memory: also SIZE bars over SYMBOLS symbols, into fixed_symbols")
    parser.add_argument("--batches", type=int, default=50, help="memory: batches a training at most")
    parser.add_argument("--delete-data", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    out = {"regime": regime, "conformal": conformal, "cost": cost, "memory": memory}[args.what](args)
    out.update({"cpu": model, "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
                "command": "python3 bench/backtest_bench.py " + " ".join(sys.argv[1:])})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
