"""`qtft tune` measured on the embedded data: the README demo's defaults against the best of
16 trials by successive halving and the best of 16 random trials on the same budget.

    python3 bench/tune_bench.py [--qtft build/qtft] [--work DIR] [--json out.json]
                                [--trials 16] [--eta 3] [--space bench/tune_space.json] [--threads 2]
                                [--epochs 3] [--max-batches-per-epoch N] [--find-lr-steps 100]
                                [--long-epochs 10]

Runs one after the other, each timed on the wall clock:
  defaults: `qtft train --epochs 3 --hidden-size 32` (scripts/train.sh's demo), its best
            validation loss;
  long:     the same with `--epochs 10` (train's own default), how far more training of the
            demo's model goes on this data;
  halving:  `qtft tune --tune-file SPACE --trials 16 --epochs 3`: 16 trials on 1/9 of the
            demo's budget (a third of an epoch), the best 5 on 1/3, the best on all 3 epochs;
  random:   `qtft tune --method random` with the same trials, each on the budget halving
            spent divided among them;
  nproc:    the halving search again with `--nproc 2` (two worker processes, one thread
            each, instead of one process of --threads threads): its wall time, and whether
            it promoted the same trials;
  find-lr:  `qtft tune --find-lr` on the demo's setup (--find-lr-steps from 1e-6 to 1): the rate
            it suggests, and the seconds the sweep took.
Every trial trains the embedded data with the demo's options bar the ones the space draws.
The JSON records every trial run from the journals, the command and the CPU. Run on an
otherwise idle machine.
"""

import argparse
import json
import os
import shutil
import subprocess
import time

from bench_record import command_line, cpu_name, finish


def timed(command):
    print("$ " + " ".join(command), flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def budget_flags(args):
    """The full budget: the demo's 3 epochs unless told (a smaller one for a smoke run)."""
    flags = ["--epochs", str(args.epochs)]
    if args.max_batches_per_epoch:
        flags += ["--max-batches-per-epoch", str(args.max_batches_per_epoch)]
    return flags


def search(args, method, nproc=1):
    output = os.path.join(args.work, method if nproc == 1 else f"{method}-nproc{nproc}")
    shutil.rmtree(output, ignore_errors=True)
    threads = ["--threads", str(args.threads)] if nproc == 1 else ["--nproc", str(nproc)]
    wall = timed([args.qtft, "tune", "--tune-file", args.space, "--trials", str(args.trials), "--eta", str(args.eta),
                  "--method", method, *budget_flags(args), *threads, "--output", output])
    with open(os.path.join(output, "journal.json")) as f:
        runs = json.load(f)["runs"]
    last_rung = max(r["rung"] for r in runs)
    finalists = [r for r in runs if r["rung"] == last_rung and r["val_loss"] is not None]
    best = min(finalists, key=lambda r: r["val_loss"])
    return {"wall_seconds": wall, "runs": runs, "best": best,
            "training_seconds": sum(r["seconds"] for r in runs),
            "budgets_spent": sum(r["budget"] for r in runs)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qtft", default="build/qtft")
    parser.add_argument("--work", default="build/tune-bench")
    parser.add_argument("--json")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument("--space", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "tune_space.json"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-batches-per-epoch", type=int, default=0)
    parser.add_argument("--find-lr-steps", type=int, default=100)
    parser.add_argument("--long-epochs", type=int, default=10, help="the defaults trained this long, for the floor")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    metrics = os.path.join(args.work, "defaults.json")
    defaults_wall = timed([args.qtft, "train", *budget_flags(args), "--hidden-size", "32", "--threads",
                           str(args.threads), "--metrics-json", metrics])
    with open(metrics) as f:
        defaults_loss = json.load(f)["val_loss"]
    long_metrics = os.path.join(args.work, "long.json")
    long_flags = ["--epochs", str(args.long_epochs)] + budget_flags(args)[2:]  # the same batch cap, if any
    long_wall = timed([args.qtft, "train", *long_flags, "--hidden-size", "32", "--threads", str(args.threads),
                       "--metrics-json", long_metrics])
    with open(long_metrics) as f:
        long_run = json.load(f)
    halving = search(args, "halving")
    random = search(args, "random")
    side_by_side = search(args, "halving", nproc=2)
    promoted = lambda s: sorted((r["rung"], r["trial"]) for r in s["runs"])
    side_by_side["same_trials_promoted"] = promoted(side_by_side) == promoted(halving)
    side_by_side["wall_ratio_to_one_process"] = side_by_side["wall_seconds"] / halving["wall_seconds"]
    lr_dir = os.path.join(args.work, "find-lr")
    shutil.rmtree(lr_dir, ignore_errors=True)
    lr_wall = timed([args.qtft, "tune", "--find-lr", "--find-lr-steps", str(args.find_lr_steps), "--hidden-size", "32",
                     "--threads", str(args.threads), "--output", lr_dir])
    with open(os.path.join(lr_dir, "lr_find.json")) as f:
        lr_find = json.load(f)
    lr_find["wall_seconds"] = lr_wall
    h, r = halving["best"]["val_loss"], random["best"]["val_loss"]
    result = {
        "cpu": cpu_name(), "cores": os.cpu_count(), "command": command_line("tune_bench.py"),
        "threads": args.threads, "nproc_threads_per_worker": max(1, os.cpu_count() // 2),
        "trials": args.trials, "eta": args.eta, "epochs": args.epochs,
        "max_batches_per_epoch": args.max_batches_per_epoch, "space": json.load(open(args.space)),
        "defaults": {"val_loss": defaults_loss, "wall_seconds": defaults_wall},
        "long": {"epochs": args.long_epochs, "val_loss": long_run["val_loss"], "best_epoch": long_run["best_epoch"],
                 "wall_seconds": long_wall, "below_defaults": 1 - long_run["val_loss"] / defaults_loss},
        "halving": halving, "random": random, "halving_nproc2": side_by_side, "find_lr": lr_find,
        "halving_below_defaults": 1 - h / defaults_loss,
        "halving_below_random": 1 - h / r,
        # In the demo's budgets (one budget: 3 epochs of the embedded data).
        "halving_budget_share_of_full_trials": halving["budgets_spent"] / args.trials,
    }
    print(f"defaults: validation loss {defaults_loss:.5f} ({defaults_wall:.0f} s)")
    print(f"long:     {args.long_epochs} epochs, validation loss {long_run['val_loss']:.5f} "
          f"({100 * result['long']['below_defaults']:.1f}% below the defaults; {long_wall:.0f} s)")
    print(f"halving:  best {h:.5f} (trial {halving['best']['trial']}, {halving['best']['options']}), "
          f"{100 * result['halving_below_defaults']:.1f}% below the defaults; {halving['wall_seconds']:.0f} s, "
          f"{halving['budgets_spent']:.2f} budgets")
    print(f"random:   best {r:.5f} (trial {random['best']['trial']}); halving {100 * result['halving_below_random']:.1f}% "
          f"below it; {random['wall_seconds']:.0f} s, {random['budgets_spent']:.2f} budgets")
    print(f"nproc 2:  {side_by_side['wall_seconds']:.0f} s ({side_by_side['wall_ratio_to_one_process']:.2f} of one "
          f"process), the same trials promoted: {side_by_side['same_trials_promoted']}")
    print(f"find-lr:  suggests {lr_find['suggested_learning_rate']} (lowest loss at "
          f"{lr_find['lowest_loss_learning_rate']}), {lr_wall:.0f} s")
    finish(result, args.json)


if __name__ == "__main__":
    main()
