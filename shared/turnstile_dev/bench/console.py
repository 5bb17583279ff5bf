"""The operator console's page loads on a big bucket: `python -m turnstile_dev.bench.console
[--tables 200 --batches 10000 --repeats 5 --out bench/console.md]` (and a phase of `make bench`).

Fills an in-memory bucket (`console_bucket`) with the records of `tables` tables and `batches`
batches, then renders each page through the console's own application (Starlette's TestClient:
routing, the token check, the reads through the ops layer, the templates), `repeats` times each,
and reports the median and the slowest load per page, with where the time of the tables page goes
(a profile of one load, by the functions that spend it).

The in-memory store, as the scale figures of `make bench` use it: fake-gcs-server's listing time
grows with the objects under the prefix whatever the limit, so over it the figure would measure
the emulator (its writes alone take minutes for 30,000 objects on a 2-core machine).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from turnstile.config.settings import Settings
from turnstile.store.memory import MemoryStore
from turnstile.ui import pages
from turnstile.ui.app import create_app
from turnstile.ui.context import Console
from turnstile_dev.bench.console_bucket import WriteClock, fill

TOKEN = "bench-token"
TARGET_SECONDS = 1.0


def run(tables: int = 200, batches: int = 10_000, repeats: int = 5) -> dict[str, Any]:
    clock = WriteClock()
    store = MemoryStore("console-bench", clock)
    started = time.perf_counter()
    filled = fill(store, tables, batches, clock=clock)
    fill_seconds = time.perf_counter() - started
    clock.at = filled.end + timedelta(minutes=10)  # the console reads the bucket ten minutes later
    console = Console(store, Settings.from_env({}), TOKEN, storage="memory", clock=clock)
    client = TestClient(create_app(console), base_url="http://127.0.0.1:8765")
    client.cookies.set("turnstile_console_8765", TOKEN)
    paths = {
        "tables": "/",
        "tables, refresh": "/fragment/tables?sort=lag&desc=1",
        "table (blocked)": f"/table/{filled.blocked[0]}" if filled.blocked else "/table/src0/t000",
        "table (derived)": f"/table/{filled.derived[0]}" if filled.derived else "/table/src0/t000",
        "lineage": "/lineage",
    }
    timings: dict[str, dict[str, float]] = {}
    for name, path in paths.items():
        seconds = []
        for _ in range(repeats + 1):  # the first load compiles the templates: not counted
            begun = time.perf_counter()
            response = client.get(path)
            seconds.append(time.perf_counter() - begun)
            if response.status_code != 200:
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:500]}")
        counted = seconds[1:]
        timings[name] = {"median_seconds": statistics.median(counted), "max_seconds": max(counted)}
    slowest = max(t["median_seconds"] for t in timings.values())
    return {
        "tables": filled.tables,
        "batches": filled.batches,
        "objects": filled.objects,
        "fill_seconds": round(fill_seconds, 1),
        "repeats": repeats,
        "pages": {k: {m: round(v, 3) for m, v in t.items()} for k, t in timings.items()},
        "slowest_median_seconds": round(slowest, 3),
        "target_seconds": TARGET_SECONDS,
        "met": slowest < TARGET_SECONDS,
        "tables_page_profile": _profile(console),
    }


def _profile(console: Console, shown: int = 12) -> list[dict[str, Any]]:
    """Where the tables page's reads go: one call of what it renders from (`pages.tables`, in this
    thread: the application runs it on a worker thread the profiler does not see), turnstile's
    functions by their cumulative time, the longest first."""
    profile = cProfile.Profile()
    profile.enable()
    pages.tables(console, pages.TablesQuery())
    profile.disable()
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (file, line, function), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "/turnstile/" not in file:
            continue
        where = file.split("/turnstile/", 1)[1]
        rows.append(
            {
                "function": f"{where}:{line} {function}",
                "calls": calls,
                "own_seconds": round(own, 4),
                "cumulative_seconds": round(cumulative, 4),
            }
        )
    rows.sort(key=lambda r: -r["cumulative_seconds"])
    total = max(rows[0]["cumulative_seconds"], 1e-9) if rows else 1.0  # the page's own call
    for row in rows:
        row["share"] = round(row["cumulative_seconds"] / total, 3)
    return rows[:shown]


def markdown(result: dict[str, Any]) -> str:
    rows = "\n".join(
        f"| {name} | {t['median_seconds']:.3f} | {t['max_seconds']:.3f} |"
        for name, t in result["pages"].items()
    )
    profile = "\n".join(
        f"| `{p['function']}` | {p['calls']} | {p['cumulative_seconds']:.3f} | {p['share'] * 100:.0f}% |"
        for p in result["tables_page_profile"]
    )
    met = "under" if result["met"] else "NOT under"
    return f"""Page loads of the operator console (`turnstile ui`) on an in-memory bucket of
{result["tables"]} tables and {result["batches"]:,} batches ({result["objects"]:,} objects), rendered
through the console's application (TestClient), median and slowest of {result["repeats"]} loads each:
the slowest page's median is {met} the {result["target_seconds"]:g} s target.

| page | median s | slowest s |
| --- | --- | --- |
{rows}

Where one load of the tables page goes (under the profiler, which slows it down), the turnstile
functions that take the longest with what they call:

| function | calls | seconds | share |
| --- | --- | --- | --- |
{profile}
"""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m turnstile_dev.bench.console", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="also write the report there (bench/console.md)")
    args = parser.parse_args(argv)
    text = markdown(run(args.tables, args.batches, args.repeats))
    print(text)
    if args.out:
        args.out.write_text(f"# The operator console's page loads\n\n{text}")


if __name__ == "__main__":
    main()
