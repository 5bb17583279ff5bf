"""The operator console's page loads on a big bucket: `python -m turnstile_dev.bench.console
[--tables 200 --batches 10000 --repeats 5 --before bench/console-before.json --out bench/console.md]`
(and a phase of `make bench`). `--before`: figures measured before a change, shown beside.

Fills a bucket (`console_bucket`) with the records of `tables` tables and `batches` batches, on two
stores: in memory, and on fake-gcs-server as the local stack runs it (its filesystem backend,
through the google-cloud-storage client, with the emulator's write lock, as `turnstile ui` on the
local stack reads it). Each page is rendered through the console's own application (Starlette's
TestClient, started as the served console starts: its first reading of every table begins then):
routing, the token check, the reads through the ops layer, the templates.

Per store: the first load of the tables page, from the console's start: its first answer (within
the console's patience: the whole table, or how far the first reading has got) and the time until
it shows every table (fetched again as the page does), then the median and the slowest of
`repeats` loads of each page; what one reading of every table costs (its seconds, with the
console's workers and one table at a time, and its storage requests, by operation, at the store
port); and on the in-memory store where the reading's time goes (a profile, by the functions that
spend it).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import html
import io
import pstats
import re
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from turnstile.config.settings import Settings
from turnstile.core.clock import Clock, SystemClock
from turnstile.local import emulator
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore
from turnstile.store.recording import RecordingStore
from turnstile.ui import pages
from turnstile.ui.app import create_app
from turnstile.ui.context import Console
from turnstile_dev.bench.console_bucket import Filled, WriteClock, fill
from turnstile_dev.bench.console_report import markdown

__all__ = ["main", "markdown", "run"]

TOKEN = "bench-token"
TARGET_SECONDS = 1.0
EMULATOR = "fake-gcs-server"
STORES = ("memory", EMULATOR)


@contextmanager
def _memory(tables: int, batches: int) -> Iterator[tuple[ObjectStore, Filled, Clock, bool]]:
    clock = WriteClock()
    store = MemoryStore("console-bench", clock)
    filled = fill(store, tables, batches, clock=clock)
    clock.at = filled.end + timedelta(minutes=10)  # the console reads the bucket ten minutes later
    yield store, filled, clock, False


@contextmanager
def _emulator(tables: int, batches: int) -> Iterator[tuple[ObjectStore, Filled, Clock, bool]]:
    """The local stack's emulator: filesystem backend, the write lock of `wiring.object_store`;
    the console reads it through one listing of the bucket, as `turnstile ui` does on it."""
    with tempfile.TemporaryDirectory(prefix="console-bench-") as home:
        server = emulator.start(Path(home), backend="filesystem")
        try:
            server.create_bucket("console-bench")
            store = GcsStore(
                make_client("local", server.url),
                "console-bench",
                emulator_writes=WriteLock.for_emulator(server.url),
            )
            yield store, fill(store, tables, batches, workers=8), SystemClock(), True
        finally:
            server.stop()


def run(
    tables: int = 200, batches: int = 10_000, repeats: int = 5, stores: Sequence[str] = STORES
) -> dict[str, Any]:
    measured: dict[str, dict[str, Any]] = {}
    profile: list[dict[str, Any]] = []
    last: Filled | None = None
    for name in stores:
        began = time.perf_counter()
        with (_memory if name == "memory" else _emulator)(tables, batches) as (store, filled, clock, one):
            fill_seconds = time.perf_counter() - began
            counted = RecordingStore(store)
            console = Console(
                counted, Settings.from_env({}), TOKEN, storage=name, clock=clock, one_listing=one
            )
            measured[name] = _loads(console, filled, repeats) | {
                "objects": filled.objects,
                "fill_seconds": round(fill_seconds, 1),
                "patience_seconds": console.patience_seconds,
                "reading": _reading(console, counted, len_tables=filled.tables),
            }
            if name == "memory":
                profile = _profile(console)
            last = filled
    assert last is not None
    slowest = max(t["median_seconds"] for m in measured.values() for t in m["pages"].values())
    return {
        "tables": last.tables,
        "batches": last.batches,
        "repeats": repeats,
        "stores": measured,
        "slowest_median_seconds": round(slowest, 3),
        "target_seconds": TARGET_SECONDS,
        "met": slowest < TARGET_SECONDS,
        "tables_page_profile": profile,
    }


def _loads(console: Console, filled: Filled, repeats: int) -> dict[str, Any]:
    """The first load of the tables page from the console's start, then each page `repeats` times."""
    paths = {
        "tables": "/",
        "tables, refresh": "/fragment/tables?sort=lag&desc=1",
        "table (blocked)": f"/table/{filled.blocked[0]}" if filled.blocked else "/table/src0/t000",
        "table (derived)": f"/table/{filled.derived[0]}" if filled.derived else "/table/src0/t000",
        "lineage": "/lineage",
    }
    started = time.perf_counter()
    with TestClient(create_app(console), base_url="http://127.0.0.1:8765") as client:
        client.cookies.set("turnstile_console_8765", TOKEN)
        first = _get(client, "/")
        first_seconds = time.perf_counter() - started
        said = _reading_said(first)
        while "data-reading" in first:  # fetched again as the page does, until every table is shown
            first = _get(client, "/fragment/tables")
        complete_seconds = time.perf_counter() - started
        for path in paths.values():  # each template compiled once: not counted
            _get(client, path)
        timings: dict[str, dict[str, float]] = {}
        for name, path in paths.items():
            seconds = []
            for _ in range(repeats):
                begun = time.perf_counter()
                _get(client, path)
                seconds.append(time.perf_counter() - begun)
            timings[name] = {
                "median_seconds": round(statistics.median(seconds), 3),
                "max_seconds": round(max(seconds), 3),
            }
    return {
        "first_load_seconds": round(first_seconds, 3),
        "first_answer_said": said,
        "first_complete_seconds": round(complete_seconds, 3),
        "pages": timings,
    }


def _reading_said(page: str) -> str | None:
    """What a page served during the reading says of it ("reading tables: 0 of 200 read"); None
    for a page with every table."""
    found = re.search(r'id="reading".*?<strong>(.*?)</strong>', page, re.S)
    return " ".join(html.unescape(found.group(1)).split()) if found else None


def _get(client: TestClient, path: str) -> str:
    response = client.get(path)
    if response.status_code != 200:
        raise RuntimeError(f"{path}: {response.status_code} {response.text[:500]}")
    return response.text


def _reading(console: Console, counted: RecordingStore, len_tables: int) -> dict[str, Any]:
    """One reading of every table as the console makes it in the background (`workers` tables at
    once), and one reading a table at a time: seconds, and storage requests by operation at the
    store port (a listing counts once, whatever pages it takes)."""
    began = time.perf_counter()
    pages.read_all(dataclasses.replace(console, workers=1))
    serial = time.perf_counter() - began
    counted.ops.clear()
    began = time.perf_counter()
    pages.read_all(console)
    seconds = time.perf_counter() - began
    ops = dict(sorted(counted.ops.items()))
    return {
        "seconds": round(seconds, 3),
        "workers": console.workers,
        "serial_seconds": round(serial, 3),
        "requests": ops,
        "requests_per_table": round(sum(ops.values()) / max(len_tables, 1), 1),
    }


def _profile(console: Console, shown: int = 12) -> list[dict[str, Any]]:
    """Where a reading of every table goes (`pages.read_all`, what the tables page is served from,
    called in this thread), turnstile's functions by their cumulative time, the longest first."""
    profile = cProfile.Profile()
    profile.enable()
    pages.read_all(console)
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
    total = max(rows[0]["cumulative_seconds"], 1e-9) if rows else 1.0  # the reading's own call
    for row in rows:
        row["share"] = round(row["cumulative_seconds"] / total, 3)
    return rows[:shown]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m turnstile_dev.bench.console", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--store", choices=STORES, action="append", help="default: both")
    parser.add_argument("--before", type=Path, help="figures before a change (JSON), shown beside")
    parser.add_argument("--out", type=Path, help="also write the report there (bench/console.md)")
    args = parser.parse_args(argv)
    result = run(args.tables, args.batches, args.repeats, args.store or STORES)
    text = markdown(result, args.before.read_text() if args.before else None)
    print(text)
    if args.out:
        args.out.write_text(f"# The operator console's page loads\n\n{text}")


if __name__ == "__main__":
    main()
