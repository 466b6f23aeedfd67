"""Cost of single LibTorch CPU kernels on one activation of the paper-sized TFT ([64*192, 160] float).

Run with the Python of qtft's venv (the same torch wheel qtft links):
    ~/.cache/qtft/venv-*/bin/python bench/kernel_costs.py [--threads 2] [--calls 20] [--json out.json]
It shows why qtft generates its own dropout masks and composes its own activation fake
quantization (docs/PERFORMANCE.md): LibTorch's kernels for both cost several matrix products.
"""

import argparse
import json
import os
import time

import torch


def ms_per_call(fn, calls=20):
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=20, help="timed calls per kernel, after one untimed")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x = torch.randn(64 * 192, 160) * 3
    w = torch.randn(160, 160)
    scale, zero_point = torch.tensor([0.02]), torch.tensor([3], dtype=torch.int32)

    def composite_fake_quant():  # what qtft::quant::fake_quantize_per_tensor runs
        q = (x * scale.reciprocal()).round_().add_(zero_point)
        out = q.clamp(0, 255)
        mask = out == q
        return out.sub_(zero_point).mul_(scale), mask

    rows = [
        ("matrix product x @ w (160 x 160)", lambda: x @ w),
        ("torch dropout(p=0.1) (bernoulli_ masks)", lambda: torch.nn.functional.dropout(x, 0.1, True)),
        ("torch.rand_like (uniform draws)", lambda: torch.rand_like(x)),
        ("fake_quantize_per_tensor_affine (ATen kernel)",
         lambda: torch.fake_quantize_per_tensor_affine(x, scale, zero_point, 0, 255)),
        ("the same fake quantization as ATen elementwise ops", composite_fake_quant),
        ("aminmax (an observer's reduction)", lambda: torch.aminmax(x)),
        ("elementwise multiply", lambda: x * x),
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, x {tuple(x.shape)}")
    results = []
    for name, fn in rows:
        ms = ms_per_call(fn, args.calls)
        results.append({"kernel": name, "ms_per_call": ms})
        print(f"  {name:55s} {ms:7.2f} ms")
    if args.json:
        figures = {"torch": torch.__version__, "threads": torch.get_num_threads(), "shape": list(x.shape),
                   "calls": args.calls, "kernels": results}
        with open(args.json + ".tmp", "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
            f.write("\n")
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
