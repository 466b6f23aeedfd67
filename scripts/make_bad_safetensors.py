#!/usr/bin/env python3
"""Rewrites the safetensors test corpora, byte for byte the same on every run.

tests/data/safetensors_bad/  one malformed file per rule the reader enforces, plus
                             MANIFEST.json: file name -> phrase its error message must hold
                             (tests/io/safetensors_test.cpp checks both ways).
fuzz/corpus/                 a few small valid files that seed the libFuzzer target.

Plain python3, no packages: the headers are written as raw text on purpose, so that a
corpus file can say what a JSON library would refuse to produce (a key twice, say).

    python3 scripts/make_bad_safetensors.py
"""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
BAD_DIR = ROOT / "tests" / "data" / "safetensors_bad"
SEED_DIR = ROOT / "fuzz" / "corpus"

# Mirrors kMaxHeaderBytes in include/qtft/io/safetensors.h.
MAX_HEADER_BYTES = 100 * 1024 * 1024


def raw_file(header, data=b"", header_len=None):
    """8-byte little-endian header length, header text, data buffer; header_len may lie."""
    text = header.encode("utf-8")
    return struct.pack("<Q", len(text) if header_len is None else header_len) + text + data


def valid_file(header, data=b""):
    """As the reference writer does it: header padded with spaces to a multiple of 8."""
    return raw_file(header + " " * (-len(header.encode("utf-8")) % 8), data)


def u8(begin, end, shape=None):
    """A U8 tensor entry; its shape defaults to what the offsets need."""
    shape = [end - begin] if shape is None else shape
    return '{"dtype":"U8","shape":%s,"data_offsets":[%d,%d]}' % (json.dumps(shape), begin, end)


# name -> (bytes, phrase). The phrases are the fixed parts of src/io/safetensors.cpp's messages.
BAD = {
    "too_short": (b"\x02\x00\x00\x00\x00", "shorter than the 8-byte header length"),
    "header_past_end": (raw_file("{}", header_len=64), "runs past the end of the file"),
    "header_over_limit": (raw_file("{}", header_len=MAX_HEADER_BYTES + 1),
                          "exceeds the 100 MB limit"),
    "invalid_json": (raw_file('{"a":'), "header is not valid JSON"),
    "not_an_object": (raw_file("[1,2]"), "header does not start with '{'"),
    "unknown_dtype": (raw_file('{"a":{"dtype":"F24","shape":[1],"data_offsets":[0,8]}}',
                               bytes(8)), "unknown dtype 'F24'"),
    "negative_shape": (raw_file('{"a":%s}' % u8(0, 1, [-1]), bytes(1)),
                       "shape holds -1, not a non-negative integer"),
    "float_shape": (raw_file('{"a":%s}' % u8(0, 1, [1.5]), bytes(1)),
                    "shape holds 1.5, not a non-negative integer"),
    "offsets_reversed": (raw_file('{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}',
                                  bytes(4)), "end before they begin"),
    "size_mismatch": (raw_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}',
                               bytes(4)), "need 8 bytes but data_offsets span 4"),
    "shape_overflow": (raw_file('{"a":%s}' % u8(0, 1, [2**32, 2**32]), bytes(1)),
                       "need more than 2^64 bytes"),
    "offsets_out_of_range": (raw_file('{"a":%s}' % u8(0, 8), bytes(4)),
                             "past the data buffer of 4 bytes"),
    "overlap": (raw_file('{"a":%s,"b":%s}' % (u8(0, 4), u8(2, 6)), bytes(6)),
                "overlaps the tensor before it"),
    "hole": (raw_file('{"a":%s,"b":%s}' % (u8(0, 4), u8(6, 10)), bytes(10)),
             "hole in the data buffer at bytes [4, 6)"),
    "trailing_bytes": (raw_file('{"a":%s}' % u8(0, 4), bytes(6)),
                       "2 trailing bytes after the last tensor"),
    "duplicate_name": (raw_file('{"a":%s,"a":%s}' % (u8(0, 2), u8(2, 4)), bytes(4)),
                       "has the key 'a' twice"),
    "metadata_not_string": (raw_file('{"__metadata__":{"epoch":3}}'),
                            "__metadata__ entry 'epoch' is not a string"),
    "unknown_field": (raw_file('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],'
                               '"strides":[1]}}', bytes(1)), "unknown field 'strides'"),
    "too_deep": (raw_file('{"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}}', bytes(1)),
                 "nests deeper than 3 levels"),
}

SEEDS = {
    "valid_empty": valid_file("{}"),
    "valid_two_tensors": valid_file(
        '{"__metadata__":{"format":"pt"},'
        '"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
        '"b":{"dtype":"I8","shape":[2,2],"data_offsets":[8,12]}}',
        struct.pack("<2f", 1.5, -2.0) + bytes([1, 255, 0, 127])),
    "valid_scalar_and_empty": valid_file(
        '{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},'
        '"e":{"dtype":"BF16","shape":[3,0],"data_offsets":[8,8]}}',
        struct.pack("<d", 0.25)),
}


def rewrite(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    # Stale files from an older version of this script would otherwise linger unchecked.
    for old in folder.glob("*.safetensors"):
        old.unlink()
    for name, data in files.items():
        (folder / (name + ".safetensors")).write_bytes(data)


def main():
    rewrite(BAD_DIR, {name: data for name, (data, _) in BAD.items()})
    manifest = {name + ".safetensors": phrase for name, (_, phrase) in sorted(BAD.items())}
    (BAD_DIR / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    rewrite(SEED_DIR, SEEDS)
    print(f"wrote {len(BAD)} files to {BAD_DIR} and {len(SEEDS)} to {SEED_DIR}")


if __name__ == "__main__":
    main()
