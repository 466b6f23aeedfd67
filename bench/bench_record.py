"""What every bench script's JSON record carries and how it is written: the machine's CPU,
the command that reproduces it, and an atomic write (imported by the bench scripts that
sit beside it)."""
import json
import os
import subprocess
import sys
import time


def cpu_name():
    """lscpu's model name: the CPU every figure of a record was measured on."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "?")


def command_line(script):
    """The command that reproduces this run: `python3 bench/<script>` and its arguments."""
    return " ".join([f"python3 bench/{script}"] + sys.argv[1:])


def finish(result, path):
    """`result` with the date, printed as one JSON line, and written to `path` when given
    (a temporary file renamed, so a reader never sees half a record)."""
    result = {**result, "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(result))
    if path:
        with open(path + ".tmp", "w") as f:
            f.write(json.dumps(result, indent=2) + "\n")
        os.replace(path + ".tmp", path)
    return result
