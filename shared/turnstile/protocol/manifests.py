"""Builds a job's manifest: per batch, its data objects and resolved config, in order."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from turnstile.config.cascade import ResolvedConfig
from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import ConfigError
from turnstile.names.batchfiles import data_files, unread_sub_folders
from turnstile.names.paths import Batch
from turnstile.protocol.context import Invocation
from turnstile.state.records import Manifest, ManifestBatch
from turnstile.store.port import object_uri


def data_objects(inv: Invocation, batch: Batch, load: LoadConfig) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """URIs of the batch's data files (`turnstile.names.batchfiles`: its own files, or with `nested` every
    file below its folder; never `_`, `.` or `.crc` files) and their sizes, from one listing.
    ConfigError when files in sub-folders would be left out without the config saying so."""
    listing = {info.name: info.size for info in inv.store.list_entries(batch.folder)}
    if (unread := unread_files(inv, batch.folder, listing, load)) is not None:
        raise ConfigError(unread)
    success = inv.settings.success_filename
    gate = inv.settings.start_backfill_filename
    names = data_files(
        batch.folder, listing, nested=load.nested_folders, success_filename=success, gate_filename=gate
    )
    return tuple(object_uri(inv.store, name) for name in names), tuple(listing[name] for name in names)


def unread_files(inv: Invocation, folder: str, names: Iterable[str], load: LoadConfig) -> str | None:
    """Why the batch in `folder` cannot be applied as its config reads it (`names`: a listing of
    it): files in sub-folders that a config leaving `nested` unset neither reads nor leaves out."""
    if not load.nested_unsaid:
        return None
    uri = object_uri(inv.store, folder)
    return unread_sub_folders(uri, folder, names, success_filename=inv.settings.success_filename)


def manifest_batch(
    inv: Invocation,
    batch: Batch,
    resolved: ResolvedConfig,
    success_generation: int,
    *,
    data_uris: tuple[str, ...] | None = None,
    data_sizes: tuple[int, ...] | None = None,
) -> ManifestBatch:
    """Everything the job needs about one batch; lists its folder unless the caller already did."""
    table = batch.table
    if data_uris is None:
        data_uris, data_sizes = data_objects(inv, batch, resolved.load)
    source = resolved.transform_source
    window = _step_window(resolved, batch.rel)
    return ManifestBatch(
        dataset=table.dataset,
        table=table.table,
        table_prefix=table.prefix,
        rel=batch.rel,
        success_generation=success_generation,
        data_uris=data_uris,
        data_sizes=data_sizes,
        load=resolved.load,
        transform_sql=resolved.transform_sql,
        transform_source=object_uri(inv.store, source) if source else None,
        mapping_source=object_uri(inv.store, resolved.mapping_source) if resolved.mapping_source else None,
        audit_sql=resolved.audit_sql,
        audit_source=object_uri(inv.store, resolved.audit_source) if resolved.audit_source else None,
        config_digest=resolved.digest,
        max_batches_per_job=resolved.load.max_batches_per_job,
        result=table.result(batch.rel, success_generation),
        failed_prefix=table.failed_rows(batch.rel),
        natural_time=batch.natural_time,
        window_start=window[0],
        window_end=window[1],
    )


def _step_window(resolved: ResolvedConfig, rel: str) -> tuple[datetime | None, datetime | None]:
    """A derived table's step: the window [start, end) its rel names; (None, None) otherwise."""
    steps = resolved.load.lineage
    if not steps.derived or steps.natural_time is None:
        return None, None
    return steps.natural_time.start(rel), steps.natural_time.end(rel)


def write_manifest(inv: Invocation, name: str, manifest: Manifest) -> str:
    """Write the manifest (plain write: its name is unique to the job) and return its URI."""
    inv.store.write(name, manifest.encode())
    return object_uri(inv.store, name)
