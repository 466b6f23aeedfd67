"""Does --precision bf16 train as well as FP32? Validation losses side by side, in one run.

    python3 bench/precision_accuracy.py [--qtft build/qtft] [--seeds 1,2,3] [--epochs 3]
                                        [--hidden-size 32] [--threads 2] [--declared K]
                                        [--max-batches-per-epoch N] [--no-qat] [--work DIR]
                                        [--json out.json]

Data: the embedded demo bars, and with --declared K also a file of `qtft make-data
--extra-inputs K` (lead_signal and the noise columns f00.. as --observed, event_flag as
--known, vol_class as --static-categorical). For each data set and seed, `qtft train` in FP32
and in bf16 with the same flags; the best validation loss of each run (its metrics JSON).
The FP32 seeds give a spread (lowest to highest); each bf16 loss is reported with whether it
lies inside it.

Then, unless --no-qat, the 8-bit models: for the first seed on the demo, QAT training
(--use-qat) in each precision, `qtft export-int8`, and `qtft evaluate --split validation`
of the int8 file with its integer kernels; bf16's int8 loss relative to FP32's.

Every run uses --threads (default 2); run it on an otherwise idle machine. Prints a table and
writes JSON (--json), with the CPU's name and bf16 flags.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

PRECISIONS = ("fp32", "bf16")
NO_BF16 = 3  # the exit code on a CPU without BF16 instructions (bench-smoke skips on it)


def cpu_description():
    """The CPU's model name and which of the bf16 flags /proc/cpuinfo lists."""
    name, flags = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return {"cpu": name, "avx512_bf16": "avx512_bf16" in flags, "amx_bf16": "amx_bf16" in flags}


def run(command):
    """Runs a qtft command; exits with its output when it fails."""
    started = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout[-4000:]}")
    return time.monotonic() - started


def train(args, name, data_flags, seed, precision, extra, work):
    """One training run; returns its best validation loss, its time and the saved model's path."""
    stem = os.path.join(work, f"{name}-{precision}-seed{seed}")
    command = [args.qtft, "train", *data_flags, "--epochs", str(args.epochs), "--hidden-size",
               str(args.hidden_size), "--seed", str(seed), "--precision", precision, "--threads", str(args.threads),
               "--metrics-json", stem + ".json", "--save-model", stem + ".safetensors", *extra]
    if args.max_batches_per_epoch:
        command += ["--max-batches-per-epoch", str(args.max_batches_per_epoch)]
    seconds = run(command)
    with open(stem + ".json", encoding="utf-8") as f:
        metrics = json.load(f)
    print(f"  {name:8s} seed {seed} {precision}{' QAT' if extra else ''}: validation loss "
          f"{metrics['val_loss']:.5f} ({seconds:.0f} s)", flush=True)
    return {"val_loss": metrics["val_loss"], "seconds": round(seconds, 1)}, stem + ".safetensors"


def seed_spread(args, name, data_flags, work):
    """FP32 and bf16 over the seeds: each loss, FP32's spread and whether bf16 lies in it."""
    runs = {p: [] for p in PRECISIONS}
    for seed in args.seeds:
        for precision in PRECISIONS:
            result, _ = train(args, name, data_flags, seed, precision, [], work)
            runs[precision].append({"seed": seed, **result})
    fp32 = [r["val_loss"] for r in runs["fp32"]]
    low, high = min(fp32), max(fp32)
    for r in runs["bf16"]:
        r["within_fp32_spread"] = low <= r["val_loss"] <= high
    return {"data": name, "runs": runs, "fp32_spread": [low, high]}


def int8_losses(args, work):
    """QAT in each precision on the demo, exported to int8 and evaluated on validation."""
    seed, out = args.seeds[0], {}
    for precision in PRECISIONS:
        result, model = train(args, "demo", [], seed, precision, ["--use-qat"], work)
        int8 = model.replace(".safetensors", ".int8.safetensors")
        metrics = model.replace(".safetensors", ".int8-eval.json")
        run([args.qtft, "export-int8", "--load-model", model, "--output", int8])
        run([args.qtft, "evaluate", "--load-model", int8, "--split", "validation", "--threads", str(args.threads),
             "--metrics-json", metrics])
        with open(metrics, encoding="utf-8") as f:
            evaluated = json.load(f)
        out[precision] = {"qat_val_loss": result["val_loss"], "int8_val_loss": evaluated["val_loss"],
                          "seconds": result["seconds"]}
        print(f"  demo int8 from {precision} QAT: validation loss {evaluated['val_loss']:.5f}", flush=True)
    out["bf16_int8_relative_to_fp32"] = out["bf16"]["int8_val_loss"] / out["fp32"]["int8_val_loss"] - 1.0
    out["seed"] = seed
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qtft", default="build/qtft")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hidden-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-batches-per-epoch", type=int, default=0, help="cap each epoch (0: the whole split)")
    parser.add_argument("--declared", type=int, default=0, help="also a make-data --extra-inputs K file (K >= 3)")
    parser.add_argument("--no-qat", action="store_true", help="skip the 8-bit models")
    parser.add_argument("--work", help="folder for data, models and metrics (default: a temporary one)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    if not args.seeds:
        parser.error("--seeds: at least one seed")
    if 0 < args.declared < 3:
        parser.error(f"--declared: at least 3 inputs, got {args.declared}")
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or temporary
        os.makedirs(work, exist_ok=True)
        cpu = cpu_description()
        if not (cpu["avx512_bf16"] or cpu["amx_bf16"]):
            # qtft refuses --precision bf16 there (emulated bf16 is slower than FP32).
            print(f"{cpu['cpu']} has neither avx512_bf16 nor amx_bf16: nothing to compare", file=sys.stderr)
            sys.exit(NO_BF16)
        print(f"{cpu['cpu']}: avx512_bf16 {cpu['avx512_bf16']}, amx_bf16 {cpu['amx_bf16']}; "
              f"{args.epochs} epochs, hidden {args.hidden_size}, {args.threads} threads", flush=True)
        data_sets = [seed_spread(args, "demo", [], work)]
        if args.declared:
            bars = os.path.join(work, "declared.parquet")
            run([args.qtft, "make-data", "--output", bars, "--extra-inputs", str(args.declared)])
            flags = ["--data", bars, "--observed", "lead_signal,f*", "--known", "event_flag",
                     "--static-categorical", "vol_class"]
            data_sets.append(seed_spread(args, f"declared{args.declared}", flags, work))
        int8 = None if args.no_qat else int8_losses(args, work)
    print("\ndata         FP32 spread over seeds    bf16 losses (inside the spread?)")
    for d in data_sets:
        bf16 = ", ".join(f"{r['val_loss']:.5f} ({'yes' if r['within_fp32_spread'] else 'no'})"
                         for r in d["runs"]["bf16"])
        print(f"{d['data']:12s} {d['fp32_spread'][0]:.5f} - {d['fp32_spread'][1]:.5f}      {bf16}")
    if int8:
        print(f"int8 from QAT: FP32 {int8['fp32']['int8_val_loss']:.5f}, bf16 {int8['bf16']['int8_val_loss']:.5f} "
              f"({100 * int8['bf16_int8_relative_to_fp32']:+.2f}%)")
    if args.json:
        result = {**cpu, "threads": args.threads, "epochs": args.epochs,
                  "max_batches_per_epoch": args.max_batches_per_epoch, "hidden_size": args.hidden_size,
                  "seeds": args.seeds, "data_sets": data_sets, "int8": int8}
        temporary_path = args.json + ".tmp"
        with open(temporary_path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        os.replace(temporary_path, args.json)


if __name__ == "__main__":
    main()
