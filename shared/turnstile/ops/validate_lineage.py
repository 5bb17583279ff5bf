"""`turnstile validate`, dependencies: each `depends_on` names a table that exists in the bucket,
and no table waits, through its dependencies, for itself.

A table's dependencies are those of the config cascade at its folder (`_config/load.json` at the
table or above), as the protocol reads them; the check follows them across the whole bucket.
"""

from __future__ import annotations

import json

from turnstile.config import LOAD_JSON, ConfigReader
from turnstile.errors import ConfigError, PathError
from turnstile.lineage_config import Edge
from turnstile.paths import CONFIG, parse_success
from turnstile.store.port import ObjectStore

MAX_TABLES = 1000  # tables followed from one load.json: a guard, far above any real lineage


def dependency_problems(
    store: ObjectStore, configs: ConfigReader, load_jsons: list[str]
) -> list[tuple[str, str]]:
    """(load.json, problem) for each load.json that declares `depends_on` with a table that is not
    in the bucket, or that closes a dependency cycle."""
    found: list[tuple[str, str]] = []
    for name in load_jsons:
        if not _declares_depends_on(store, name):
            continue
        table = name.removesuffix(f"/{CONFIG}/{LOAD_JSON}")
        edges = _edges(configs, table)
        if edges is None:
            continue  # its own problem is reported with the file
        for edge in edges:
            problem = _source_problem(store, configs, edge)
            if problem:
                found.append((name, f"depends_on: table {edge.prefix!r} {problem}"))
        cycle = _cycle_through(configs, table)
        if cycle:
            found.append(
                (
                    name,
                    f"depends_on: a dependency cycle {' -> '.join(cycle)}: no batch of these tables could "
                    "ever start; remove one of the dependencies",
                )
            )
    return found


def natural_time_warning(configs: ConfigReader, bucket: str, name: str, regex: str | None) -> str | None:
    """A batch of a table with `natural_time` whose path names no period (an hourly natural time
    over daily folders, say): it would neither wait for its dependencies nor move the watermark."""
    folder = name.rpartition("/")[0] + "/"
    try:
        resolved = configs.resolve(folder)
        batch = parse_success(bucket, name, resolved.load.destination_regex or regex)
        natural_time = configs.resolve(batch.table.batch_folder(""), partial=True).load.lineage.natural_time
        if natural_time is None or natural_time.start(batch.rel) is not None:
            return None
    except (ConfigError, PathError, ValueError):
        return None  # reported as a problem of the batch or of its load.json
    return (
        f"its path {batch.rel!r} names no period for the table's natural_time: it neither waits for "
        "the table's dependencies nor moves its watermark; fix the folder or natural_time"
    )


def _source_problem(store: ObjectStore, configs: ConfigReader, edge: Edge) -> str | None:
    if not store.list_objects(f"{edge.prefix}/", limit=1):
        return (
            "has no objects in the bucket (no batches, no _config/); a name is `dataset.table` for "
            "the folder `dataset/table`: fix the name or create the table's _config/ first"
        )
    try:
        source = configs.resolve(f"{edge.prefix}/", partial=True).load.lineage
    except ConfigError:
        return None  # its own load.json is reported with that file
    if source.natural_time is None:
        return (
            "has no natural_time, so it has no watermark and this table would wait forever: set "
            '"natural_time" in its _config/load.json'
        )
    return None


def _declares_depends_on(store: ObjectStore, name: str) -> bool:
    found = store.read(name)
    if found is None:
        return False
    try:
        document = json.loads(found.data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(document, dict) and bool(document.get("depends_on"))


def _edges(configs: ConfigReader, table: str) -> tuple[Edge, ...] | None:
    try:
        return configs.resolve(f"{table}/", partial=True).load.lineage.depends_on
    except ConfigError:
        return None


def _cycle_through(configs: ConfigReader, start: str) -> list[str]:
    """The tables of a path from `start` back to itself through dependencies; empty when none."""
    path: list[str] = [start]
    seen: set[str] = set()

    def walk(table: str) -> bool:
        if len(seen) > MAX_TABLES:
            return False
        for edge in _edges(configs, table) or ():
            if edge.prefix == start:
                path.append(start)
                return True
            if edge.prefix in seen:
                continue
            seen.add(edge.prefix)
            path.append(edge.prefix)
            if walk(edge.prefix):
                return True
            path.pop()
        return False

    return path if walk(start) else []
