#!/usr/bin/env python3
"""Runs a graph from `qtft export-onnx` in onnxruntime and compares it with qtft.

    check_onnx_export.py forecast MODEL.onnx INPUTS_DIR FORECAST.json [--rtol R] [--json OUT]
        Runs the graph on the tensors `qtft forecast --save-inputs INPUTS_DIR` wrote and
        compares its output in the target's units with the "return" of each series and step
        of `qtft forecast --json` (FORECAST.json, the same bars). Passes when every value is
        within R (default 1e-5) of qtft's, relative to the largest magnitude of qtft's
        forecast: |onnx - qtft| <= R * max|qtft|.

    check_onnx_export.py split MODEL.onnx SPLIT_DIR [--loss-tolerance T] [--json OUT]
        Runs the graph on every window of a split as `qtft evaluate --save-inputs SPLIT_DIR`
        wrote them (inputs, target.npy and qtft's own quantiles.npy, scaled units) and
        compares the pinball loss of the graph's quantiles with qtft's on the same windows.
        Passes when they differ by at most T (default 0.001, 0.1%) of qtft's.

Both print one JSON object with the figures, and write it to OUT when given. Run with the
venv python from scripts/setup.sh (onnxruntime and numpy, pinned in requirements.txt).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort


def session(model, threads=1):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def run_graph(sess, folder, rows=None):
    """The graph's outputs on the .npy files of `folder` named as its inputs."""
    feeds = {}
    for graph_input in sess.get_inputs():
        path = os.path.join(folder, graph_input.name + ".npy")
        if not os.path.exists(path):
            sys.exit(f"{path}: missing, the graph takes the input '{graph_input.name}'")
        values = np.load(path)
        feeds[graph_input.name] = values if rows is None else values[rows]
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def pinball(quantiles, target, levels):
    """Mean over windows, steps and levels of the quantile loss, as qtft's evaluate computes it."""
    error = target[..., None] - quantiles
    levels = np.asarray(levels, dtype=np.float64)
    return float(np.mean(np.maximum(levels * error, (levels - 1.0) * error)))


def executed_operators(model, folder):
    """The operators onnxruntime runs for the graph after its optimizations (its fused
    integer kernels among them), from its profile of one run on `folder`'s inputs: a list of
    {"operator": name, "count": nodes}, by name."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(os.path.dirname(os.path.abspath(model)), "ort-profile")
    sess = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    run_graph(sess, folder)
    profile = sess.end_profiling()
    with open(profile) as f:
        events = json.load(f)
    os.remove(profile)
    counts = {}
    for event in events:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            op = event.get("args", {}).get("op_name", "?")
            counts[op] = counts.get(op, 0) + 1
    return [{"operator": op, "count": n} for op, n in sorted(counts.items())]


def levels_of(sess):
    return json.loads(sess.get_modelmeta().custom_metadata_map["qtft.quantiles"])


def metadata_problems(sess, folder):
    """What the graph's metadata properties lack or contradict: the quantile levels, the
    window's lengths and the columns of each input, against the graph and its inputs."""
    meta = sess.get_modelmeta().custom_metadata_map
    missing = [k for k in ("qtft.quantiles", "qtft.inputs", "qtft.horizon", "qtft.encoder_length", "qtft.version",
                           "qtft.model_kind", "qtft.graph", "qtft.features", "qtft.config") if k not in meta]
    if missing:
        return [f"missing {', '.join(missing)}"]
    problems = []
    columns = json.loads(meta["qtft.inputs"])
    levels = json.loads(meta["qtft.quantiles"])
    horizon, encoder = int(meta["qtft.horizon"]), int(meta["qtft.encoder_length"])
    takes = {i.name for i in sess.get_inputs()}
    for name in ("observed", "known", "statics"):
        path = os.path.join(folder, name + ".npy")
        width = np.load(path).shape[-1] if name in takes else 0
        if width != len(columns[name]):
            problems.append(f"qtft.inputs names {len(columns[name])} {name} columns, the input has {width}")
    known = np.load(os.path.join(folder, "known.npy"))
    if known.shape[1] != encoder + horizon:
        problems.append(f"known spans {known.shape[1]} bars, qtft.encoder_length + qtft.horizon is {encoder + horizon}")
    output = sess.get_outputs()[0].shape
    if output[1:] != [horizon, len(levels)]:
        problems.append(f"the output is {output}, the metadata say [batch, {horizon}, {len(levels)}]")
    return problems


def check_forecast(args):
    sess = session(args.model)
    problems = metadata_problems(sess, args.inputs)
    graph = run_graph(sess, args.inputs)["quantiles_target_units"].astype(np.float64)
    with open(args.forecast) as f:
        forecasts = json.load(f)
    qtft = np.array([[step["return"] for step in series["steps"]] for series in forecasts], dtype=np.float64)
    if graph.shape != qtft.shape:
        sys.exit(f"the graph gives {graph.shape}, {args.forecast} holds {qtft.shape}")
    scale = float(np.max(np.abs(qtft)))
    difference = np.abs(graph - qtft)
    figures = {
        "model": args.model,
        "values": int(qtft.size),
        "max_abs_difference": float(difference.max()),
        "max_relative_to_forecast_scale": float(difference.max() / scale),
        "max_elementwise_relative": float(np.max(difference / np.maximum(np.abs(qtft), 1e-30))),
        "rtol": args.rtol,
        "metadata_problems": problems,
    }
    figures["pass"] = figures["max_relative_to_forecast_scale"] <= args.rtol and not problems
    return figures


def check_split(args):
    sess = session(args.model)
    target = np.load(os.path.join(args.inputs, "target.npy")).astype(np.float64)
    qtft = np.load(os.path.join(args.inputs, "quantiles.npy")).astype(np.float64)
    windows = target.shape[0]
    graph = np.concatenate([
        run_graph(sess, args.inputs, slice(first, min(first + 256, windows)))["quantiles"]
        for first in range(0, windows, 256)
    ]).astype(np.float64)
    levels = levels_of(sess)
    graph_loss, qtft_loss = pinball(graph, target, levels), pinball(qtft, target, levels)
    difference = np.abs(graph - qtft)
    figures = {
        "model": args.model,
        "windows": int(windows),
        "graph_loss": graph_loss,
        "qtft_loss": qtft_loss,
        "loss_relative_difference": abs(graph_loss - qtft_loss) / qtft_loss,
        "max_abs_difference": float(difference.max()),
        "mean_abs_difference": float(difference.mean()),
        "max_relative_to_output_scale": float(difference.max() / np.max(np.abs(qtft))),
        "loss_tolerance": args.loss_tolerance,
    }
    figures["pass"] = figures["loss_relative_difference"] <= args.loss_tolerance
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    forecast = commands.add_parser("forecast")
    forecast.add_argument("model")
    forecast.add_argument("inputs")
    forecast.add_argument("forecast")
    forecast.add_argument("--rtol", type=float, default=1e-5)
    split = commands.add_parser("split")
    split.add_argument("model")
    split.add_argument("inputs")
    split.add_argument("--loss-tolerance", type=float, default=0.001)
    for command in (forecast, split):
        command.add_argument("--json")
    args = parser.parse_args()
    figures = check_forecast(args) if args.command == "forecast" else check_split(args)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0 if figures["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
