"""Correctness of a contender, read back from its Iceberg tables: batches applied out of order,
twice, or not at all.

Inside a Spark session, `snapshots` walks a table's current snapshot chain from the first commit to
the last and says, for each commit, which batches' rows it added (every row carries its batch's
`seq`; the `_file` metadata column joined to the `entries` table maps rows to the commit that added
their file) and, where turnstile tagged it, its `turnstile.rel`. `violations` then counts, per
table, from that sequence alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Violations:
    out_of_order: int = 0  # batches committed after a batch that sorts after them
    twice: int = 0  # batches with rows committed more than once
    missing: int = 0  # batches not (completely) committed
    split: int = 0  # batches whose rows came in more than one commit (not atomic)

    def add(self, other: Violations) -> None:
        self.out_of_order += other.out_of_order
        self.twice += other.twice
        self.missing += other.missing
        self.split += other.split

    @property
    def total(self) -> int:
        """Out of order, twice or not at all: the figure the targets speak of."""
        return self.out_of_order + self.twice + self.missing

    def as_dict(self) -> dict[str, int]:
        return asdict(self) | {"total": self.total}


def snapshots(spark: Any, table: str) -> dict[str, Any]:
    """The table's commits in order: [{"id", "committed_at_ms", "rel", "seqs": {seq: rows}}], and
    per batch the rows whose id is there more than once."""
    if not spark.catalog.tableExists(table):
        return {"commits": [], "duplicates": {}}
    chain = {
        int(r["snapshot_id"]): r
        for r in spark.sql(
            "SELECT snapshot_id, parent_id, committed_at, summary['turnstile.rel'] AS rel "
            f"FROM {table}.snapshots"
        ).collect()
    }
    current = spark.sql(f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor").collect()
    ancestors = {int(r["snapshot_id"]) for r in current}
    ordered: list[int] = []
    parents = {
        int(chain[a]["parent_id"]) for a in ancestors if a in chain and chain[a]["parent_id"] is not None
    }
    head = next((s for s in ancestors if s not in parents), None)  # the current snapshot
    while head is not None and head in chain:
        ordered.append(head)
        parent = chain[head]["parent_id"]
        head = int(parent) if parent is not None else None
    ordered.reverse()
    added: dict[int, dict[int, int]] = {}
    rows = spark.sql(
        f"SELECT e.snapshot_id AS snapshot, d.seq AS seq, count(*) AS n FROM "
        f"(SELECT _file AS path, seq FROM {table}) d JOIN "
        f"(SELECT snapshot_id, data_file.file_path AS path FROM {table}.entries WHERE status != 2) e "
        "ON d.path = e.path GROUP BY e.snapshot_id, d.seq"
    ).collect()
    for r in rows:
        added.setdefault(int(r["snapshot"]), {})[int(r["seq"])] = int(r["n"])
    duplicates = {
        int(r["seq"]): int(r["dup"])
        for r in spark.sql(
            f"SELECT seq, count(*) - count(DISTINCT id) AS dup FROM {table} GROUP BY seq"
        ).collect()
        if int(r["dup"])
    }
    commits = [
        {
            "id": s,
            "committed_at_ms": int(chain[s]["committed_at"].timestamp() * 1000),
            "rel": chain[s]["rel"],
            "seqs": {str(k): v for k, v in sorted(added.get(s, {}).items())},
        }
        for s in ordered
    ]
    return {"commits": commits, "duplicates": {str(k): v for k, v in duplicates.items()}}


def violations(found: dict[str, Any], batches: int, rows_per_batch: int) -> Violations:
    """Count from the data: which batches each commit added, in commit order."""
    result = Violations()
    seen_rows: dict[int, int] = {}
    commits_of: dict[int, int] = {}
    highest = -1
    for commit in found["commits"]:
        seqs = {int(k): int(v) for k, v in commit["seqs"].items()}
        for seq in seqs:
            if seq not in seen_rows and seq < highest:
                result.out_of_order += 1
        for seq, rows in seqs.items():
            seen_rows[seq] = seen_rows.get(seq, 0) + rows
            commits_of[seq] = commits_of.get(seq, 0) + 1
        if seqs:
            highest = max(highest, *seqs)
    duplicated = {int(k) for k in found["duplicates"]}
    for seq in range(batches):
        rows = seen_rows.get(seq, 0)
        if seq in duplicated or rows > rows_per_batch:
            result.twice += 1
        elif rows < rows_per_batch:
            result.missing += 1
        if commits_of.get(seq, 0) > 1:
            result.split += 1
    return result


def rel_violations(found: dict[str, Any], rels: list[str]) -> Violations:
    """Count from turnstile's own commit tags (`turnstile.rel`), for the turnstile contenders."""
    result = Violations()
    tagged = [c["rel"] for c in found["commits"] if c["rel"] is not None]
    highest = ""
    seen: set[str] = set()
    for rel in tagged:
        if rel in seen:
            result.twice += 1
        elif rel < highest:
            result.out_of_order += 1
        seen.add(rel)
        highest = max(highest, rel)
    result.missing = len(set(rels) - seen)
    return result


def last_commit_ms(found: dict[str, Any]) -> int | None:
    times = [int(c["committed_at_ms"]) for c in found["commits"]]
    return max(times) if times else None
