"""How long ``--help`` takes: the console scripts started the way a user starts them.

Prints, per command, the wall time and the CPU time (user + system, of the child) of ``--runs``
starts: min and median. CPU time is the figure to compare on a busy machine (wall time there
includes waiting for a core). The target (issue 9) is under 0.3 s wall on an idle machine;
``tests/unit/test_cli_imports.py`` guards the cause (no numpy, scipy, SDK or pydantic import).

    .venv/bin/python benchmarks/bench_cli_help.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
COMMANDS = (
    ("extraction-eval", "--help"),
    ("run-experiment", "--help"),
    ("extraction-eval", "run", "--help"),
)


def _once(argv: list[str]) -> tuple[float, float]:
    """(wall, child CPU) seconds of one start."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"{'command':34} {'wall min':>9} {'wall med':>9} {'cpu min':>8} {'cpu med':>8}")
    for command in COMMANDS:
        argv = [str(BIN / command[0]), *command[1:]]
        _once(argv)  # warm the file cache
        walls, cpus = zip(*(_once(argv) for _ in range(args.runs)), strict=True)
        print(
            f"{' '.join(command):34} {min(walls):9.3f} {statistics.median(walls):9.3f}"
            f" {min(cpus):8.3f} {statistics.median(cpus):8.3f}"
        )
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
