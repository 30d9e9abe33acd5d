"""Run every benchmark in bench/ (render.py, check_dns.py, csr.py, ...) in turn.

Each script prints its own figures and exits non-zero when it misses a goal;
this runner reports which did and exits 1 if any did. `make bench` calls it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    me = Path(__file__).name
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != me and not p.name.startswith("_"))
    missed = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        start = time.perf_counter()
        rc = subprocess.run([sys.executable, str(script)], check=False).returncode
        print(f"== {script.name}: exit {rc} in {time.perf_counter() - start:.1f} s\n", flush=True)
        if rc != 0:
            missed.append(script.name)
    if missed:
        print("goals missed or errors in: " + ", ".join(missed))
        return 1
    print(f"all {len(scripts)} benchmarks met their goals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
