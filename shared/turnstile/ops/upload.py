"""`turnstile put`: upload a local folder as one batch, data files first and `_SUCCESS` last.

Checked before anything is written (a refusal changes nothing):
- the local folder exists and holds data files: with the table's `nested` off only files (the job
  reads the files directly in a batch folder, never sub-folders) and no file named like the success
  marker (turnstile writes that one itself, last); with `nested` on every data file below it, as
  the job reads them, a Spark output folder's own `_SUCCESS` skipped;
- the destination is a batch folder turnstile accepts: its path parses with the destination regex
  its config cascade selects, and the cascade validates;
- the destination holds nothing yet (`force` skips this check: re-publishing a folder applies it
  again, old files included).
Files whose names start with `.` or `_` are skipped: the job would ignore them (`.crc` files and
Hadoop's own markers of a local Spark output folder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from turnstile.config.cascade import ConfigReader
from turnstile.config.settings import Settings
from turnstile.core.errors import ConfigError, PathError
from turnstile.names.batchfiles import NESTED_OPTION, is_data_file, is_data_name
from turnstile.names.paths import Batch, ObjectKind, classify, parse_success
from turnstile.ops import session
from turnstile.ops.errors import Refused
from turnstile.protocol import lock as table_lock
from turnstile.protocol import publisher
from turnstile.store.port import ObjectStore, object_uri


@dataclass(frozen=True)
class Plan:
    batch: Batch
    files: tuple[Path, ...]
    skipped: tuple[str, ...]
    total_bytes: int
    success: str  # object name of the marker written last
    root: Path  # the local folder; a file's place below it is its place in the batch folder


@dataclass(frozen=True)
class Uploaded:
    object: str
    generation: int
    size: int


def plan(local_dir: Path, store: ObjectStore, settings: Settings, folder: str, *, force: bool) -> Plan:
    """What `put` will upload, or `Refused` saying why not."""
    success = settings.success_filename
    if not local_dir.is_dir():
        raise Refused(f"{local_dir} is not a folder; pass the folder holding the batch's data files")
    name = f"{folder.strip('/')}/{success}"
    where = object_uri(store, folder.strip("/"))
    if classify(name, success) is not ObjectKind.SUCCESS:
        parent = folder.strip("/").removesuffix(f"/{success}")
        hint = f"; pass the batch folder: {object_uri(store, parent)}" if parent != folder.strip("/") else ""
        raise Refused(
            f"{where} would never be applied: a batch folder may not be, or sit below, a folder whose "
            f"name starts with '_' (turnstile's own objects and markers live there){hint}"
        )
    try:
        resolved = ConfigReader(store).resolve(name.rpartition("/")[0] + "/")
        batch = parse_success(
            store.bucket, name, resolved.load.destination_regex or settings.destination_regex
        )
    except (PathError, ConfigError) as exc:
        raise Refused(f"{where} would be rejected: {exc}") from exc
    if not batch.rel and (resolved.ordered or settings.order_per_table):
        position = table_lock.read(session.invocation(store, settings), batch.table)[0].position
        refusal = publisher.root_batch_refusal(batch, position)
        if refusal is not None:
            raise Refused(refusal)
    nested = resolved.load.nested_folders
    files, skipped = _nested_files(local_dir, success) if nested else _own_files(local_dir, success)
    if not files:
        raise Refused(f"{local_dir} holds no data file to upload; put the batch's files in it")
    if not force and store.list_entries(batch.folder, limit=1):
        raise Refused(
            f"{object_uri(store, batch.folder)} already holds objects; choose a new batch path, or pass "
            "--force to upload into it and publish it again (its old files are part of the batch too)"
        )
    return Plan(
        batch,
        tuple(files),
        tuple(skipped),
        sum(p.stat().st_size for p in files),
        batch.success(success),
        local_dir,
    )


def _own_files(local_dir: Path, success: str) -> tuple[list[Path], list[str]]:
    """The files directly in the folder (the table's `nested` is off)."""
    files: list[Path] = []
    skipped: list[str] = []
    for path in sorted(local_dir.iterdir()):
        if path.name == success:
            raise Refused(
                f"{path} is named like the success marker {success!r}; remove it: put uploads the "
                "data files and writes the marker itself, last"
            )
        if path.is_dir():
            raise Refused(
                f"{path} is a folder; a batch is the files directly in one folder, so move them up or "
                "put the sub-folder as its own batch (or, for partitioned output such as dt=…/ "
                f"folders, set {NESTED_OPTION} in the table's _config/load.json)"
            )
        if not is_data_name(path.name):
            skipped.append(path.name)
            continue
        files.append(path)
    return files, skipped


def _nested_files(local_dir: Path, success: str) -> tuple[list[Path], list[str]]:
    """Every data file below the folder (the table's `nested` is on), by the batch-files rule; a
    Spark output folder's own `_SUCCESS` is skipped: put writes the marker itself, last."""
    files: list[Path] = []
    skipped: list[str] = []
    for path in sorted(p for p in local_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(local_dir).as_posix()
        if is_data_file("", rel, nested=True):
            files.append(path)
        else:
            skipped.append(rel)
    return files, skipped


def put(store: ObjectStore, planned: Plan, advance: Callable[[int], None] = lambda n: None) -> list[Uploaded]:
    """Upload the files in name order, then `_SUCCESS`; return what was written, marker last."""
    done = []
    for path in planned.files:
        data = path.read_bytes()
        name = f"{planned.batch.folder}{path.relative_to(planned.root).as_posix()}"
        done.append(Uploaded(object_uri(store, name), store.write(name, data), len(data)))
        advance(len(data))
    generation = store.write(planned.success, b"")
    done.append(Uploaded(object_uri(store, planned.success), generation, 0))
    return done
