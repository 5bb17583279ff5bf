"""Builds manifests over an in-memory bucket and runs them through the real Iceberg applier."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from turnstile.config.load_config import LoadConfig
from turnstile.core.clock import SystemClock
from turnstile.core.errors import PathError
from turnstile.names.paths import parse_success
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.staging import LocalStaging
from turnstile.state.execution import execute
from turnstile.state.records import JobDone, Manifest, ManifestBatch
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore

BUCKET = "spark-tests"
_generations = itertools.count(1000)
_tables = itertools.count()


class Kit:
    """One fresh table per kit: `ds.t<N>` in the session's `local` catalog."""

    def __init__(self, spark: Any, tmp: Path, *, store: ObjectStore | None = None, **load: Any) -> None:
        self.spark = spark
        self.store = store or MemoryStore(BUCKET)
        self.bucket = self.store.bucket
        self.dataset = "ds"
        self.name = f"t{next(_tables)}"
        self.prefix = f"{self.dataset}/{self.name}"
        self.table = f"local.{self.dataset}.{self.name}"
        self.load = load
        self.transform: str | None = None
        self.transform_source: str | None = None  # gs:// URI the manifest names for `transform`
        self.staging = LocalStaging(lambda bucket: self.store, tmp / "staged")

    def batch(
        self, rel: str, *files: tuple[str, bytes], generation: int | None = None, **load: Any
    ) -> ManifestBatch:
        uris = []
        for filename, data in files:
            name = f"{self.prefix}/{rel}/{filename}"
            self.store.write(name, data)
            uris.append(f"gs://{self.bucket}/{name}")
        config = LoadConfig.model_validate(self.load | load)
        gen = generation or next(_generations)
        return ManifestBatch(
            dataset=self.dataset,
            table=self.name,
            table_prefix=self.prefix,
            rel=rel,
            success_generation=gen,
            data_uris=tuple(uris),
            load=config,
            transform_sql=self.transform,
            transform_source=self.transform_source,
            config_digest="test",
            result=f"{self.prefix}/_turnstile/results/{rel}/{gen}.json",
            failed_prefix=f"{self.prefix}/_failed/{rel}/",
            natural_time=natural_time(f"{self.prefix}/{rel}/_SUCCESS"),
        )

    def step(self, rel: str, start: datetime, *, hours: int = 1, generation: int = 1) -> ManifestBatch:
        """A derived table's step: no data files, the window [start, start + hours)."""
        return self.batch(rel, generation=generation).model_copy(
            update={"window_start": start, "window_end": start + timedelta(hours=hours)}
        )

    def applier(self) -> IcebergApplier:
        return IcebergApplier(self.spark, "local", self.staging, lambda bucket: self.store, self.bucket)

    def run(self, *batches: ManifestBatch, job_id: str = "job-1", ordered: bool = True) -> JobDone:
        manifest = Manifest(
            job_id=job_id,
            bucket=self.bucket,
            batches=batches,
            done_signal=f"{self.prefix}/_turnstile/jobs/{job_id}.done",
            ordered=ordered,
        )
        return execute(self.store, manifest, self.applier(), SystemClock())

    def rows(self, order: str = "1") -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(f"SELECT * FROM {self.table} ORDER BY {order}").collect()]

    def snapshots(self) -> list[dict[str, str]]:
        return [
            dict(r["summary"])
            for r in self.spark.sql(
                f"SELECT summary FROM {self.table}.snapshots ORDER BY committed_at"
            ).collect()
        ]


def natural_time(success: str) -> datetime | None:
    """What the protocol puts in the manifest: the time the default layout's folders name."""
    try:
        return parse_success(BUCKET, success).natural_time
    except PathError:
        return None


def csv(*lines: str) -> tuple[str, bytes]:
    return ("part-0.csv", ("\n".join(lines) + "\n").encode())
