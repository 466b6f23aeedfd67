#!/usr/bin/env python3
"""How closely onnxruntime runs qtft's ONNX exports: every kind of model the tests train,
exported, run on the inputs qtft saved, and compared with qtft (scripts/check_onnx_export.py).

For each model: the largest difference of one forecast of every series (the output in the
target's units against `qtft forecast --json`), relative to the forecast's largest value; the
pinball loss of every test-split window (scaled units) against qtft's loss on the same
windows; what the export wrote (nodes, quantized activations, int8 products, float weights)
and which operators onnxruntime ran after its optimizations (its fused integer kernels:
MatMulIntegerToFloat, QGemm). The QDQ graphs compare with qtft's int8 file run with
`--int8-kernels dequantized` (bitwise the QAT model).

    python3 bench/onnx_agreement.py [--qtft build/qtft] [--only defaults-fp32,...]
                                    [--json docs/results/onnx_agreement.json]
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import check_onnx_export  # noqa: E402
from bench_record import command_line, cpu_name, finish  # noqa: E402
import onnxruntime  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
SMALL = ["--attention-heads", "2", "--encoder-length", "16", "--horizon", "4", "--epochs", "1",
         "--max-batches-per-epoch", "3", "--batch-size", "16", "--seed", "3", "--threads", "1"]
QAT = ["--use-qat", "--qat-calibration-batches", "2"]
KINDS = ["--observed", "lead_signal", "--observed-categorical", "event_flag", "--known", "f00", "--static", "tick",
         "--hidden-size", "32", "--variable-hidden-size", "16"]


def qtft(args, binary, capture=True):
    run = subprocess.run([binary] + args, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"qtft {' '.join(args)}: exit {run.returncode}\n{run.stderr}")
    return run.stdout


def split_files(full, work):
    """Bars 1-300 of each symbol train (with a static real of our own, tick: the symbol's tick
    size); bars 261-300 and the declared columns of bars 301-304 (the rows ahead) forecast."""
    with open(full) as f:
        rows = list(csv.reader(f))
    header, by_symbol = rows[0], {}
    for row in rows[1:]:
        by_symbol.setdefault(row[1], []).append(row)
    train, recent = os.path.join(work, "train.csv"), os.path.join(work, "recent.csv")
    with open(train, "w", newline="") as t, open(recent, "w", newline="") as r:
        tw, rw = csv.writer(t), csv.writer(r)
        tw.writerow(header + ["tick"])
        rw.writerow(header + ["tick"])
        for k, (symbol, bars) in enumerate(by_symbol.items()):
            tick = f"{0.25 * 2 ** k:f}"
            for i, bar in enumerate(bars[:304]):
                if i < 300:
                    tw.writerow(bar + [tick])
                if 260 <= i < 300:
                    rw.writerow(bar + [tick])
                if i >= 300:  # the known and static columns only
                    ahead = [""] * len(bar)
                    for c in (0, 1, 8, 10, 11):
                        ahead[c] = bar[c]
                    rw.writerow(ahead + [tick])
    return train, recent


def measure(name, model, recent, split_bars, work, binary, int8_kernels=None):
    graph = os.path.join(work, name + ".onnx")
    exported = qtft(["export-onnx", "--load-model", model, "--output", graph], binary)
    kernels = ["--int8-kernels", int8_kernels] if int8_kernels else []
    inputs, windows = os.path.join(work, name + "-inputs"), os.path.join(work, name + "-split")
    forecast = qtft(["forecast", "--load-model", model, "--csv-file", recent, "--json", "--save-inputs", inputs,
                     "--device", "cpu"] + kernels, binary)
    forecast_json = os.path.join(work, name + ".forecast.json")
    with open(forecast_json, "w") as f:
        f.write(forecast)
    qtft(["evaluate", "--load-model", model, "--csv-file", split_bars, "--split", "test", "--save-inputs", windows,
          "--device", "cpu"] + kernels, binary)
    one = check_onnx_export.check_forecast(SimpleNamespace(model=graph, inputs=inputs, forecast=forecast_json,
                                                           rtol=1.0))
    split = check_onnx_export.check_split(SimpleNamespace(model=graph, inputs=windows, loss_tolerance=1.0))
    numbers = lambda pattern: [int(n) for n in re.search(pattern, exported).groups()]
    row = {"model": name, "graph": "qdq" if "QDQ" in exported else "float",
           "nodes": numbers(r": (\d+) nodes")[0],
           "forecast_values": one["values"],
           "forecast_max_relative_to_scale": one["max_relative_to_forecast_scale"],
           "split_windows": split["windows"], "split_graph_loss": split["graph_loss"],
           "split_qtft_loss": split["qtft_loss"], "split_loss_relative_difference": split["loss_relative_difference"],
           "split_max_relative_to_output_scale": split["max_relative_to_output_scale"],
           "onnxruntime_operators": check_onnx_export.executed_operators(graph, inputs)}
    if row["graph"] == "qdq":
        activations, products, tables, floats = numbers(
            r"QDQ: (\d+) activations quantized, (\d+) products and (\d+) embedding tables in int8; (\d+)")
        row.update({"quantized_activations": activations, "int8_products": products, "int8_tables": tables,
                    "float_weights": floats})
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qtft", default=os.path.join(ROOT, "build", "qtft"))
    parser.add_argument("--json", help="write the figures as JSON")
    parser.add_argument("--only", help="only these models, comma-separated (e.g. defaults-fp32,defaults-qat)")
    args = parser.parse_args()
    binary = args.qtft
    only = set(args.only.split(",")) if args.only else None
    wanted = lambda *names: only is None or any(n in only for n in names)
    rows = []
    with tempfile.TemporaryDirectory(prefix="qtft-onnx-agreement-") as work:
        path = lambda name: os.path.join(work, name)
        qtft(["make-data", "--output", path("full.csv"), "--rows", "616", "--symbols", "2", "--extra-inputs", "5"],
             binary)
        train, recent = split_files(path("full.csv"), work)
        qtft(["make-data", "--output", path("defaults.csv"), "--rows", "600", "--symbols", "2"], binary)
        # The golden models: the default inputs, and declared ones (observed reals, a known and
        # a static categorical, a calendar in a time zone, per-series scaling).
        for kind in ("fp32", "qat"):
            if wanted(f"defaults-{kind}"):
                rows.append(measure(f"defaults-{kind}", os.path.join(GOLDEN, f"defaults_3f2c661_{kind}.safetensors"),
                                    path("defaults.csv"), path("defaults.csv"), work, binary))
            if wanted(f"declared-{kind}"):
                rows.append(measure(f"declared-{kind}", os.path.join(GOLDEN, f"declared_b7a7acb_{kind}.safetensors"),
                                    os.path.join(GOLDEN, "declared_recent.csv"), path("full.csv"), work, binary))
        # The other declared kinds (an observed categorical, a known real, a static real) at
        # variable width 16 under hidden 32, in FP32, at 8- and 4-bit weights and with 7-bit
        # activations, with the int8 files of the QAT models.
        for name, extra in (("kinds-fp32", []), ("kinds-qat8", QAT), ("kinds-qat4", QAT + ["--weight-bits", "4"]),
                            ("kinds-qat8-a7", QAT + ["--activation-bits", "7"])):
            int8_name = name.replace("qat", "int8-")
            if not wanted(name, int8_name):
                continue
            model = path(name + ".safetensors")
            qtft(["train", "--csv-file", train] + SMALL + KINDS + extra + ["--save-model", model], binary)
            if wanted(name):
                rows.append(measure(name, model, recent, train, work, binary))
            if extra and wanted(int8_name):
                int8 = path(name + ".int8.safetensors")
                qtft(["export-int8", "--load-model", model, "--output", int8], binary)
                rows.append(measure(int8_name, int8, recent, train, work, binary, "dequantized"))
        # A wide model: 38 declared inputs at the narrower default width 16.
        if wanted("wide-fp32"):
            qtft(["make-data", "--output", path("wide.csv"), "--rows", "400", "--symbols", "2", "--extra-inputs", "40"],
                 binary)
            qtft(["train", "--csv-file", path("wide.csv"), "--observed", "lead_signal,f*", "--hidden-size", "32"] +
                 SMALL + ["--save-model", path("wide.safetensors")], binary)
            rows.append(measure("wide-fp32", path("wide.safetensors"), path("wide.csv"), path("wide.csv"), work,
                                binary))
        # Configuration W's sizes (bench/bench_configs.h): the paper's encoder, horizon and
        # hidden size with 201 declared observed inputs at width 16.
        if wanted("wide-paper-fp32"):
            qtft(["make-data", "--output", path("wide-paper.csv"), "--rows", "2400", "--symbols", "2",
                  "--extra-inputs", "203"], binary)
            qtft(["train", "--csv-file", path("wide-paper.csv"), "--observed", "lead_signal,f*", "--hidden-size", "160",
                  "--attention-heads", "4", "--encoder-length", "168", "--horizon", "24", "--epochs", "1",
                  "--max-batches-per-epoch", "1", "--batch-size", "8", "--threads", "2",
                  "--validation-fraction", "0.2", "--test-fraction", "0.2",
                  "--save-model", path("wide-paper.safetensors")], binary)
            rows.append(measure("wide-paper-fp32", path("wide-paper.safetensors"), path("wide-paper.csv"),
                                path("wide-paper.csv"), work, binary))
    return report(rows, args)


def report(rows, args):
    print(f"{'model':<16} {'graph':<6} {'nodes':>6} {'forecast max diff':>18} {'split loss diff':>16} "
          f"{'split max diff':>15}")
    for r in rows:
        print(f"{r['model']:<16} {r['graph']:<6} {r['nodes']:>6} {r['forecast_max_relative_to_scale']:>18.2e} "
              f"{r['split_loss_relative_difference']:>16.2e} {r['split_max_relative_to_output_scale']:>15.2e}")
    result = {"command": command_line("onnx_agreement.py"), "cpu": cpu_name(), "onnxruntime": onnxruntime.__version__,
              "rows": rows}
    finish(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
