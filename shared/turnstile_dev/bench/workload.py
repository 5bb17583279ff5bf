"""The benchmark's workload: T tables x N batches x F CSV files x R rows, arriving out of order.

Every contender gets the same bytes. Batch `i` of a table is the hour `i` after 2024-01-01T00 in the
usual hourly layout (`<dataset>/t<k>/YYYY/MM/DD/HH/part-<j>.csv`, then `_SUCCESS`), so rel order is
time order. Upstream delivers the batches out of order: within consecutive windows of `window`
batches the order is shuffled (a seeded shuffle per table), and the tables' arrivals interleave.
Each row says which batch it belongs to (`seq`), so any table can be checked for batches applied out
of order, twice or not at all from its data and snapshots alone.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from turnstile.store.port import ObjectStore

SCHEMA = "id BIGINT, seq INT, part INT, amount DOUBLE, category STRING, ts TIMESTAMP"
HEADER = "id,seq,part,amount,category,ts\n"
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
SUCCESS = "_SUCCESS"
GATE = "_HISTORYDONE"  # START_BACKFILL_FILENAME of the turnstile runs: batches queue until it exists


@dataclass(frozen=True)
class Workload:
    tables: int
    batches: int
    files: int
    rows: int
    window: int = 10  # a batch arrives at most window - 1 places away from its own
    seed: int = 7

    @property
    def total_batches(self) -> int:
        return self.tables * self.batches

    @property
    def total_rows(self) -> int:
        return self.total_batches * self.files * self.rows

    def prefix(self, batches: int) -> Workload:
        """The first `batches` batches of every table (a contender too slow for the whole)."""
        return replace(self, batches=min(batches, self.batches))

    def with_tables(self, tables: int) -> Workload:
        return replace(self, tables=tables)

    @staticmethod
    def table(index: int) -> str:
        return f"t{index}"

    @staticmethod
    def rel(batch: int) -> str:
        return (EPOCH + timedelta(hours=batch)).strftime("%Y/%m/%d/%H")

    def rels(self) -> list[str]:
        return [self.rel(b) for b in range(self.batches)]

    def order(self, table: int) -> list[int]:
        """The batches of one table in the order upstream delivers them."""
        rng = random.Random(self.seed * 1_000_003 + table)
        order: list[int] = []
        for start in range(0, self.batches, self.window):
            window = list(range(start, min(start + self.window, self.batches)))
            rng.shuffle(window)
            order += window
        return order

    def arrival(self) -> list[tuple[int, int]]:
        """(table, batch) in arrival order: the tables' sequences interleaved."""
        orders = [self.order(t) for t in range(self.tables)]
        return [(t, orders[t][k]) for k in range(self.batches) for t in range(self.tables)]

    def csv(self, batch: int, part: int) -> bytes:
        """File `part` of a batch; the same bytes for every table and contender."""
        lines = [HEADER]
        base = (batch * self.files + part) * self.rows
        start = EPOCH + timedelta(hours=batch)
        for row in range(self.rows):
            key = base + row
            ts = (start + timedelta(seconds=row * 3600 // max(self.rows, 1))).strftime("%Y-%m-%d %H:%M:%S")
            lines.append(f"{key},{batch},{part},{(key * 7919) % 100_000 / 100:.2f},c{key % 17},{ts}\n")
        return "".join(lines).encode()

    def file_name(self, part: int) -> str:
        return f"part-{part:05d}.csv"

    def upload(self, store: ObjectStore, dataset: str) -> float:
        """Upstream: per batch in arrival order, its data files, then `_SUCCESS`. Returns seconds."""
        started = time.monotonic()
        for table, batch in self.arrival():
            folder = f"{dataset}/{self.table(table)}/{self.rel(batch)}"
            for part in range(self.files):
                store.write(f"{folder}/{self.file_name(part)}", self.csv(batch, part))
            store.write(f"{folder}/{SUCCESS}", b"")
        return time.monotonic() - started

    def write_folder(self, root: Path) -> Path:
        """The same files for Spark's file source: one flat folder per table, written in arrival
        order, with modification times one second apart in that order (the file source orders by
        them). Returns root; table k's files are in root/t<k>/."""
        order = self.arrival()
        count = len(order) * self.files
        base = time.time() - count - 60
        index = 0
        for table, batch in order:
            folder = root / self.table(table)
            folder.mkdir(parents=True, exist_ok=True)
            for part in range(self.files):
                path = folder / f"{self.rel(batch).replace('/', '-')}-{self.file_name(part)}"
                path.write_bytes(self.csv(batch, part))
                os.utime(path, (base + index, base + index))
                index += 1
        return root

    def write_batches(self, root: Path) -> list[list[str]]:
        """The files of table t0 per batch, in rel order, as local paths (for in-session runs)."""
        paths: list[list[str]] = []
        for batch in range(self.batches):
            folder = root / self.rel(batch)
            folder.mkdir(parents=True, exist_ok=True)
            files = []
            for part in range(self.files):
                path = folder / self.file_name(part)
                path.write_bytes(self.csv(batch, part))
                files.append(str(path))
            paths.append(files)
        return paths

    def describe(self) -> str:
        return (
            f"{self.tables} tables x {self.batches} batches x {self.files} files x {self.rows} rows "
            f"({self.total_batches} batches, {self.total_rows:,} rows)"
        )
