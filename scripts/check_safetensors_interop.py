#!/usr/bin/env python3
"""Checks qtft's safetensors files against the reference Python implementation.

    check_safetensors_interop.py verify PATH   load a file qtft wrote; exit 0 if every tensor
                                                and metadata entry is exactly EXPECTED below
    check_safetensors_interop.py write PATH    write EXPECTED with safetensors.torch, for
                                                qtft to read back

Run with the venv python from scripts/setup.sh (safetensors, numpy, torch). The values are
mirrored in tests/io/safetensors_python_test.cpp as hand-computed bytes; change both together.
Comparisons are on bit patterns, so -0.0 against 0.0 or a rounded half float is a mismatch.
"""
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

# name -> (safetensors dtype, shape, values in row-major order)
EXPECTED = {
    "f32": ("F32", (2, 3), [1.5, -2.25, 0.0, -0.0, float("inf"), 16777216.0]),
    "f32_scalar": ("F32", (), [42.0]),
    "f16": ("F16", (4,), [1.0, -2.0, 0.5, 65504.0]),
    "bf16": ("BF16", (2, 2), [1.0, -2.0, 0.5, 3.140625]),
    "i64": ("I64", (4,), [-(2**63), 2**63 - 1, 0, -1]),
    "i8": ("I8", (2, 2), [-128, 127, 0, -1]),
    "u8": ("U8", (3,), [0, 255, 7]),
    "bool": ("BOOL", (3,), [True, False, True]),
}
METADATA = {"format": "pt", "source": "qtft", "note": "Zürich ✓"}

NUMPY_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I8": np.int8,
                "U8": np.uint8, "BOOL": np.bool_}
TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                "I64": torch.int64, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def expected_torch(dtype, shape, values):
    return torch.tensor(values, dtype=TORCH_DTYPES[dtype]).reshape(shape)


def raw_bytes(tensor):
    """Little-endian bytes of a numpy array or torch tensor, for a bit-exact comparison."""
    if isinstance(tensor, torch.Tensor):
        # numpy has no bfloat16; a same-width integer view keeps the bits.
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.view(torch.int16)
        tensor = tensor.contiguous().numpy()
    return np.ascontiguousarray(tensor).astype(tensor.dtype.newbyteorder("<")).tobytes()


def verify(path):
    errors = []
    # numpy for what numpy can hold, torch for bf16, which numpy lacks.
    with safe_open(path, framework="np") as np_file, safe_open(path, framework="pt") as pt_file:
        names = set(np_file.keys())
        if names != set(EXPECTED):
            errors.append(f"tensor names {sorted(names)}, expected {sorted(EXPECTED)}")
        metadata = np_file.metadata() or {}
        if metadata != METADATA:
            errors.append(f"metadata {metadata!r}, expected {METADATA!r}")
        for name, (dtype, shape, values) in EXPECTED.items():
            if name not in names:
                continue
            if dtype == "BF16":
                got = pt_file.get_tensor(name)
                want = expected_torch(dtype, shape, values)
                got_dtype, want_dtype = got.dtype, want.dtype
            else:
                got = np_file.get_tensor(name)
                want = np.array(values, dtype=NUMPY_DTYPES[dtype]).reshape(shape)
                got_dtype, want_dtype = got.dtype, want.dtype
            if got_dtype != want_dtype or tuple(got.shape) != shape:
                errors.append(f"{name}: {got_dtype} {tuple(got.shape)}, "
                              f"expected {want_dtype} {shape}")
            elif raw_bytes(got) != raw_bytes(want):
                errors.append(f"{name}: bytes {raw_bytes(got).hex()}, "
                              f"expected {raw_bytes(want).hex()}")
    for e in errors:
        print(f"{path}: {e}", file=sys.stderr)
    return 1 if errors else 0


def write(path):
    tensors = {name: expected_torch(*spec) for name, spec in EXPECTED.items()}
    save_file(tensors, path, metadata=METADATA)
    return 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ("verify", "write"):
        print(__doc__, file=sys.stderr)
        return 2
    return verify(argv[2]) if argv[1] == "verify" else write(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
