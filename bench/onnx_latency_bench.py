#!/usr/bin/env python3
"""Latency of an exported ONNX graph in onnxruntime beside qtft's Forecaster, in one run.

`build/bench/forecast_latency_bench --export-onnx DIR` times Forecaster::forecast on its
models (FP32, and an int8 export with integer and with dequantized products) at each thread
count, and writes the same models as ONNX graphs (float, and QDQ for the int8 file) and the
same series as the graphs' inputs (one series, and 64). This script then times onnxruntime
(CPU execution provider) on those graphs and inputs, at the same thread counts, and prints
one table: batch 1 median and 99th percentile, batch 64 mean, per model and runtime.

The two runtimes do not time the same work: the Forecaster's figures include reading the
bars and their featurization (the inputs' preparation), the graph's only the network, on
tensors already made. Both are what a serving system pays on its path.

    python3 bench/onnx_latency_bench.py [--config small|paper] [--calls 200] [--threads 1,2]
                                        [--json docs/results/onnx_latency.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
from bench_record import command_line, cpu_name, finish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]


def load_inputs(sess, folder):
    return {i.name: np.load(os.path.join(folder, i.name + ".npy")) for i in sess.get_inputs()}


def time_graph(model, batch1, batch64, threads, calls):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    one, many = load_inputs(sess, batch1), load_inputs(sess, batch64)
    for _ in range(5):  # warm-up: first-call allocations
        sess.run(None, one)
    sess.run(None, many)
    single = []
    for _ in range(calls):
        start = time.perf_counter()
        sess.run(None, one)
        single.append(1000.0 * (time.perf_counter() - start))
    batch_calls = max(3, calls // 20)
    start = time.perf_counter()
    for _ in range(batch_calls):
        sess.run(None, many)
    batch_ms = 1000.0 * (time.perf_counter() - start) / batch_calls
    return {"single_median_ms": statistics.median(single), "single_p99_ms": percentile(single, 0.99),
            "batch_series": int(many["symbol"].shape[0]), "batch_ms": batch_ms}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "forecast_latency_bench"))
    parser.add_argument("--config", default="small", choices=["small", "paper"])
    parser.add_argument("--calls", type=int, default=200, help="timed batch-1 calls per model and runtime")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--json", help="write the figures as JSON")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    rows = []
    with tempfile.TemporaryDirectory(prefix="qtft-onnx-bench-") as work:
        graphs = os.path.join(work, "graphs")
        for t in threads:
            qtft_json = os.path.join(work, f"forecaster-{t}.json")
            subprocess.run([args.bench, "--config", args.config, "--calls", str(args.calls), "--threads", str(t),
                            "--model", "int8-integer", "--model", "int8-dequantized", "--export-onnx", graphs,
                            "--json", qtft_json], check=True, stdout=subprocess.DEVNULL)
            with open(qtft_json) as f:
                for r in json.load(f)["results"]:
                    rows.append({"runtime": "qtft Forecaster", "model": r["model"], "threads": t,
                                 "single_median_ms": r["single_median_ms"], "single_p99_ms": r["single_p99_ms"],
                                 "batch_series": r["batch_series"], "batch_ms": r["batch_ms"]})
            batch1 = os.path.join(graphs, f"{args.config}-batch1")
            batch64 = os.path.join(graphs, f"{args.config}-batch64")
            for model, graph in (("fp32", "fp32"), ("int8 (QDQ)", "int8")):
                timing = time_graph(os.path.join(graphs, f"{args.config}-{graph}.onnx"), batch1, batch64, t, args.calls)
                rows.append({"runtime": f"onnxruntime {ort.__version__}", "model": model, "threads": t, **timing})

    print(f"{args.config} configuration, CPU: {cpu_name()}")
    print(f"{'runtime':<22} {'model':<17} {'threads':>7} {'batch1 median ms':>17} {'p99 ms':>8} "
          f"{'batch64 ms':>11} {'series/s':>9}")
    for r in rows:
        print(f"{r['runtime']:<22} {r['model']:<17} {r['threads']:>7} {r['single_median_ms']:>17.3f} "
              f"{r['single_p99_ms']:>8.3f} {r['batch_ms']:>11.2f} {1000.0 * r['batch_series'] / r['batch_ms']:>9.0f}")
    finish({"command": command_line("onnx_latency_bench.py"), "config": args.config, "cpu": cpu_name(),
            "cores": os.cpu_count(), "onnxruntime": ort.__version__, "calls": args.calls, "rows": rows}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
