"""Read the last run's ``var/test-durations/*.json`` (written by tests/conftest.py): per test process,
how long it was busy and with what; per module, the total. ``python -m tests.support.durations [N]``.

The suite's wall time is the busiest process's time plus the start; this shows which modules make it.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from tests.support.scheduling import module_of

ROOT = Path(__file__).resolve().parents[2]


def load(folder: Path) -> dict[str, list[tuple[str, float]]]:
    return {
        path.stem: [(nodeid, float(seconds)) for nodeid, seconds in json.loads(path.read_text())]
        for path in sorted(folder.glob("*.json"))
    }


def main(argv: list[str]) -> int:
    most = int(argv[1]) if len(argv) > 1 else 15
    runs = load(ROOT / "var" / "test-durations")
    if not runs:
        print("no durations recorded (run the tests first)")
        return 1
    modules: dict[str, float] = defaultdict(float)
    for worker, rows in runs.items():
        busy = sum(seconds for _, seconds in rows)
        print(f"{worker}: {len(rows)} tests, busy {busy:.0f} s")
        for nodeid, seconds in rows:
            modules[module_of(nodeid)] += seconds
    total = sum(modules.values())
    print(f"all: {total:.0f} s of test time; the {most} heaviest modules:")
    for module, seconds in sorted(modules.items(), key=lambda kv: -kv[1])[:most]:
        print(f"  {seconds:7.1f} s  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
