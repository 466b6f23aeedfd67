"""What selective recompute could save in one GRN of the paper-sized TFT under QAT.

Run with the Python of qtft's venv (the same torch wheel qtft links):
    ~/.cache/qtft/venv-*/bin/python bench/selective_recompute_inventory.py [--json out.json]

Megatron-LM's selective recompute keeps the outputs of the matrix products and recomputes
the elementwise work between them. This script builds one gated residual network with the
operations qtft runs under QAT (fake-quantized weight, output observer's fake quant after
every product, ELU, dropout, GLU, add and layer norm) at the shape of one variable of the
paper configuration ([64, 192, 160]), and lists every tensor autograd keeps for the backward
pass through a saved-tensors hook (shared storage counted once). It then prices the two
policies: `none` keeps all of them; `selective` keeps the product inputs (needed for the
weight gradients) and the product outputs (where each recompute starts), and drops the rest.
The difference is the most a selective policy could save in this block.
"""

import argparse
import json

import torch
import torch.nn.functional as F


def fake_quant(x, scale=0.02, zero_point=128):
    # qtft's observers run on every Dense output; what autograd keeps is the same (a mask).
    return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, 0, 255)


class Inventory:
    """Records every tensor autograd saves, once per storage, and the names of the forward's tensors."""

    def __init__(self):
        self.names = {}  # data_ptr -> name, for the tensors the forward names
        self.saved = {}  # data_ptr -> bytes

    def name(self, tensor, name):
        self.names[tensor.untyped_storage().data_ptr()] = name
        return tensor

    def pack(self, tensor):
        if isinstance(tensor, torch.nn.Parameter):
            return tensor  # weights are not activations
        ptr = tensor.untyped_storage().data_ptr()
        nbytes = tensor.untyped_storage().nbytes()
        self.saved.setdefault(ptr, nbytes)
        return tensor


def grn(inv, a, weights, dropout):
    fc1, fc2, gate, fc = weights
    y1 = inv.name(F.linear(a, fc1), "fc1 product")
    hidden = inv.name(fake_quant(y1), "fc1 fake quant")
    eta2 = inv.name(F.elu(hidden), "elu")
    y2 = inv.name(F.linear(eta2, fc2), "fc2 product")
    eta1 = inv.name(fake_quant(y2), "fc2 fake quant")
    dropped = inv.name(F.dropout(eta1, dropout, True), "dropout")
    yg = inv.name(F.linear(dropped, gate), "gate product")
    yf = inv.name(F.linear(dropped, fc), "fc product")
    g = inv.name(torch.sigmoid(fake_quant(yg)), "sigmoid")
    f = inv.name(fake_quant(yf), "fc fake quant")
    glu = inv.name(g * f, "glu")
    summed = inv.name(a + glu, "skip + glu")
    return F.layer_norm(summed, summed.shape[-1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=192, help="encoder + horizon")
    parser.add_argument("--hidden", type=int, default=160)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--json", help="also write the inventory here")
    args = parser.parse_args()
    torch.manual_seed(0)
    h = args.hidden
    weights = [torch.nn.Parameter(torch.randn(h, h) / h**0.5) for _ in range(4)]
    inv = Inventory()
    a = inv.name(torch.randn(args.batch, args.steps, h, requires_grad=True), "GRN input")
    with torch.autograd.graph.saved_tensors_hooks(inv.pack, lambda t: t):
        out = grn(inv, a, weights, args.dropout)
    del out

    # Under selective recompute the products stay; their inputs are kept for the weight
    # gradients, their outputs are where each elementwise recompute starts.
    kept_by_selective = {"GRN input", "elu", "dropout", "fc1 product", "fc2 product", "gate product", "fc product"}
    # Named at the end: an operation saves its result before the forward can name it.
    rows = sorted(((inv.names.get(ptr, "unnamed (masks, statistics)"), b) for ptr, b in inv.saved.items()),
                  key=lambda r: -r[1])
    none_bytes = sum(b for _, b in rows)
    # Product outputs are not saved by plain autograd (a product keeps its input), so the
    # selective policy adds them.
    activation = args.batch * args.steps * h * 4
    products = ["fc1 product", "fc2 product", "gate product", "fc product"]
    selective_bytes = sum(b for n, b in rows if n in kept_by_selective)
    selective_bytes += sum(activation for n in products if n not in {r[0] for r in rows})
    mib = 1 << 20
    print(f"one GRN, [{args.batch}, {args.steps}, {h}] float ({activation / mib:.1f} MiB per activation)")
    print(f"{'saved tensor (producer)':30} {'MiB':>8}")
    for name, nbytes in rows:
        print(f"{name:30} {nbytes / mib:8.2f}")
    print(f"{'policy none keeps':30} {none_bytes / mib:8.2f}")
    print(f"{'policy selective keeps':30} {selective_bytes / mib:8.2f}")
    print(f"selective saves {100 * (1 - selective_bytes / none_bytes):.1f}% of this block's saved tensors")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": [args.batch, args.steps, h],
                       "saved": [{"producer": n, "bytes": b} for n, b in rows],
                       "none_bytes": none_bytes, "selective_bytes": selective_bytes}, f, indent=2)


if __name__ == "__main__":
    main()
