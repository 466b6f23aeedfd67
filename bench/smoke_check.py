"""One benchmark at a tiny size, for ctest's `bench-smoke` label: does it still run, and does
it still write what the docs quote?

    python3 bench/smoke_check.py [--reference docs/results/X.json ...] [--skip-on-exit N]
                                 -- COMMAND ... @JSON@ ...

Runs COMMAND with @JSON@ replaced by a fresh file's path and fails when the command fails,
writes no JSON, or writes JSON that lacks a key some reference file holds. Each reference is
a file in docs/results that the same bench wrote at full size: every key in it (by path,
the elements of a list merged) must be one the bench writes today, so a figure the docs quote
from it cannot come from a key nobody writes any more. Keys the bench added since are
reported, not failed: the reference is older, and rewriting it means measuring again.
With --skip-on-exit N, the bench's exit code N (what it cannot measure on this machine, such
as bf16 on a CPU without BF16 instructions) is a skip, exit 77 (ctest's SKIP_RETURN_CODE).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

PLACEHOLDER = "@JSON@"
SKIPPED = 77


def key_paths(value, prefix=""):
    """Every key's path in a JSON value: dict keys joined by '.', a list's elements as '[]'."""
    paths = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, prefix + "[]")
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", action="append", default=[], help="a docs/results file the bench wrote")
    parser.add_argument("--skip-on-exit", type=int, help="the bench's exit code that means 'not on this machine'")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the bench's command line")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not any(PLACEHOLDER in part for part in command):
        parser.error(f"give the bench's command after --, with {PLACEHOLDER} where its JSON goes")
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out.json")
        command = [part.replace(PLACEHOLDER, out) for part in command]
        print("running:", " ".join(command), flush=True)
        done = subprocess.run(command, cwd=work, check=False)
        if args.skip_on_exit is not None and done.returncode == args.skip_on_exit:
            print(f"skipped: the bench exited {done.returncode}, which it does where it cannot measure")
            sys.exit(SKIPPED)
        if done.returncode != 0:
            sys.exit(f"the bench failed with exit code {done.returncode}")
        if not os.path.exists(out):
            sys.exit(f"the bench wrote no JSON at {out}")
        with open(out, encoding="utf-8") as f:
            written = key_paths(json.load(f))
    if not written:
        sys.exit("the bench's JSON holds no keys")
    failed = False
    for reference in args.reference:
        with open(reference, encoding="utf-8") as f:
            expected = key_paths(json.load(f))
        missing = sorted(expected - written)
        added = sorted(written - expected)
        if missing:
            failed = True
            print(f"{reference}: {len(missing)} keys the bench no longer writes: {', '.join(missing[:20])}")
        if added:
            print(f"{reference}: the bench now also writes {len(added)} keys: {', '.join(added[:20])}")
        if not missing:
            print(f"{reference}: every one of its {len(expected)} keys is written")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
