"""Object names parsed into immutable values, and the names of every state object. Pure: no
storage calls. An object name is classified by its last segment and by the reserved folders
(`_backlog/`, `_config/`, any segment starting with `_`) before any regex runs, so state objects
are recognised whatever the destination regex says."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from turnstile.core.errors import PathError
from turnstile.core.memo import cached_property
from turnstile.names.table_regex import partition_problem, table_prefix_match

BACKLOG = "_backlog"
CONFIG = "_config"
LOCK = "_bqlock"
BACKFILL = "_BACKFILL"
CLAIM_PREFIX = "_claimed_"
INTERNAL = "_turnstile"  # manifests, result records and job-done signals of a table

# ds/table/[historical|incremental/][$partition/|YYYY/[MM/[DD/[HH/]]]][batch/[folders/]], applied to
# a batch folder. As gcs_ocn_bq_ingest's regex, which is not anchored at its end, any folders may
# follow the batch id: `ds/tbl/foo/bar/baz/` is a batch of ds.tbl, batch id `foo`, rel `foo/bar/baz`.
# Dates in ASCII digits only: `\d` would also take e.g. Arabic-Indic digits.
DEFAULT_DESTINATION_REGEX = (
    r"^(?P<dataset>[^/]+)/(?P<table>[^/]+)/"
    r"(?:(?P<kind>historical|incremental)/)?"
    r"(?:\$(?P<partition>[^/]+)/"
    r"|(?P<yyyy>[0-9]{4})/(?:(?P<mm>[0-9]{2})/(?:(?P<dd>[0-9]{2})/(?:(?P<hh>[0-9]{2})/)?)?)?)?"
    r"(?:(?P<batch>[^/]+)/(?:[^/]+/)*)?$"
)
DEFAULT_LAYOUT = "<dataset>/<table>/[historical|incremental/][$partition/|YYYY/MM/DD/HH/][batch/[folders/]]"

# Dataset and table names become SQL identifiers and warehouse folders: keep them boring.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# A Google Cloud project id, as a `project.dataset` folder names it (domain-scoped `a.com:p` too).
_PROJECT = re.compile(r"(?:[a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")


class ObjectKind(Enum):
    """What an object is to turnstile; `is_action` says which make a function do anything."""

    SUCCESS = "success"  # a batch is complete
    POINTER = "pointer"  # _backlog/<rel>/_SUCCESS
    BACKFILL = "backfill"  # _BACKFILL: (re)start the subscriber
    GATE = "gate"  # START_BACKFILL_FILENAME at the table prefix
    JOB_DONE = "job_done"  # a job's completion signal under _turnstile/
    LOCK = "lock"
    CLAIM = "claim"
    CONFIG = "config"
    INTERNAL = "internal"  # other objects under a reserved folder
    DATA = "data"

    @property
    def is_action(self) -> bool:
        return self in _ACTIONS


# A pointer's own event does nothing: its publisher already started a subscriber (the sweeper
# starts one for a pointer added by hand).
_ACTIONS = {ObjectKind.SUCCESS, ObjectKind.BACKFILL, ObjectKind.GATE, ObjectKind.JOB_DONE}


@dataclass(frozen=True)
class ObjectRef:
    """One generation of one object, classified once where its event enters turnstile; the
    protocol takes this value down its call path instead of parsing the name again."""

    bucket: str
    name: str
    generation: int
    kind: ObjectKind
    destination_regex: str | None = None  # Settings.destination_regex: how `table` reads the name

    @property
    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.name}"

    @property
    def folder(self) -> str:
        """The folder the object sits in, with a trailing slash ("" at the bucket root)."""
        folder = self.name.rpartition("/")[0]
        return f"{folder}/" if folder else ""

    @cached_property
    def table(self) -> Table:
        """The table a state object (pointer, lock, `_BACKFILL`, gate, job-done signal) belongs to."""
        return table_of_state_object(self.bucket, self.name, self.destination_regex)

    @staticmethod
    def of(
        bucket: str,
        name: str,
        generation: int,
        success_filename: str = "_SUCCESS",
        gate: str | None = None,
        *,
        destination_regex: str | None = None,
    ) -> ObjectRef:
        kind = classify(name, success_filename, gate)
        return ObjectRef(bucket, name, generation, kind, destination_regex)


def classify(name: str, success_filename: str = "_SUCCESS", gate_filename: str | None = None) -> ObjectKind:
    """Classify an object name without touching storage."""
    segments = name.split("/")
    base = segments[-1]
    folders = segments[:-1]
    if CONFIG in folders:
        return ObjectKind.CONFIG
    if base.startswith(CLAIM_PREFIX):
        return ObjectKind.CLAIM  # wherever it sits: `claim_name` puts a pointer's claim in `_backlog/`
    if BACKLOG in folders:
        return ObjectKind.POINTER if base == success_filename else ObjectKind.INTERNAL
    if INTERNAL in folders:
        return ObjectKind.JOB_DONE if base.endswith(".done") else ObjectKind.INTERNAL
    if base == LOCK:
        return ObjectKind.LOCK
    if base == BACKFILL:
        return ObjectKind.BACKFILL
    if gate_filename and base == gate_filename:
        return ObjectKind.GATE
    if any(folder.startswith("_") for folder in folders):
        return ObjectKind.INTERNAL  # _failed/, _history/ and other reserved folders hold no batches
    if base == success_filename:
        return ObjectKind.SUCCESS
    return ObjectKind.DATA


@dataclass(frozen=True)
class Table:
    """A table prefix in the bucket and the Iceberg identity it maps to."""

    bucket: str
    prefix: str  # "ds/tbl" with the default layout; no trailing slash
    dataset: str
    table: str

    @property
    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.prefix}"

    @property
    def lock(self) -> str:
        return f"{self.prefix}/{LOCK}"

    @property
    def backfill(self) -> str:
        return f"{self.prefix}/{BACKFILL}"

    @property
    def backlog(self) -> str:
        """Folder of the pointers, with trailing slash (a listing prefix)."""
        return f"{self.prefix}/{BACKLOG}/"

    @property
    def internal(self) -> str:
        """Folder of manifests, result records and job-done signals, with trailing slash."""
        return f"{self.prefix}/{INTERNAL}/"

    def manifest(self, job_id: str) -> str:
        return f"{self.internal}jobs/{job_id}.manifest.json"

    def done_signal(self, job_id: str) -> str:
        return f"{self.internal}jobs/{job_id}.done"

    def result(self, rel: str, success_generation: int) -> str:
        """Result record of one batch; listing `results/` gives the history in rel order."""
        return f"{self.internal}results/{rel + '/' if rel else ''}{success_generation}.json"

    @property
    def pause(self) -> str:
        """The operator's pause of the table (`turnstile pause`): while it exists no job starts."""
        return f"{self.internal}paused.json"

    @property
    def held(self) -> str:  # unordered batches that arrived while the table was paused
        return f"{self.internal}held/"

    def held_batch(self, rel: str, success_generation: int) -> str:
        return f"{self.held}{rel + '/' if rel else ''}{success_generation}.json"

    @property
    def open_jobs(self) -> str:
        """Folder of the markers of unordered jobs not yet ended, with trailing slash."""
        return f"{self.internal}open/"

    def open_job(self, job_id: str) -> str:
        return f"{self.open_jobs}{job_id}.json"

    @property
    def failures(self) -> str:
        """Folder of the failure records of unordered batches, with trailing slash."""
        return f"{self.internal}failures/"

    def failure(self, rel: str, success_generation: int) -> str:
        return f"{self.failures}{rel + '/' if rel else ''}{success_generation}.json"

    def failed_rows(self, rel: str) -> str:
        return f"{self.prefix}/_failed/{rel + '/' if rel else ''}"

    def pointer(self, rel: str, success_filename: str = "_SUCCESS") -> str:
        return f"{self.backlog}{rel + '/' if rel else ''}{success_filename}"

    def rel_of_pointer(self, pointer: str, success_filename: str = "_SUCCESS") -> str:
        tail = pointer[len(self.backlog) :] if pointer.startswith(self.backlog) else ""
        if tail == success_filename:
            return ""
        if not tail.endswith(f"/{success_filename}"):
            raise PathError(f"{pointer!r} is not a backlog pointer of {self.uri}")
        return tail[: -len(success_filename) - 1]

    def gate(self, gate_filename: str) -> str:
        return f"{self.prefix}/{gate_filename}"

    def batch_folder(self, rel: str) -> str:
        return f"{self.prefix}/{rel}/" if rel else f"{self.prefix}/"

    def success(self, rel: str, success_filename: str = "_SUCCESS") -> str:
        """The `_SUCCESS` object of the batch `rel` (what its pointer stands for)."""
        return f"{self.batch_folder(rel)}{success_filename}"


def claim_name(name: str, generation: int) -> str:
    """The claim object that marks one generation of `name` as taken: beside it, in its folder."""
    folder, _, base = name.rpartition("/")
    return f"{folder + '/' if folder else ''}{CLAIM_PREFIX}{base}_created_at_{generation}"


@dataclass(frozen=True)
class Batch:
    """A batch folder: a table plus the rel that orders it."""

    table: Table
    rel: str
    kind: str | None = None  # historical | incremental
    partition: str | None = None  # the `$` decorator, without the `$`
    yyyy: str | None = None
    mm: str | None = None
    dd: str | None = None
    hh: str | None = None
    batch_id: str | None = None

    @property
    def folder(self) -> str:
        return self.table.batch_folder(self.rel)

    @property
    def uri(self) -> str:
        return f"gs://{self.table.bucket}/{self.folder}"

    def success(self, success_filename: str = "_SUCCESS") -> str:
        return f"{self.folder}{success_filename}"

    def pointer(self, success_filename: str = "_SUCCESS") -> str:
        return self.table.pointer(self.rel, success_filename)

    @cached_property
    def natural_time(self) -> datetime | None:
        """The hour (or day, month, year) the path names, if it names one."""
        try:
            if self.yyyy:
                return datetime(
                    int(self.yyyy), int(self.mm or 1), int(self.dd or 1), int(self.hh or 0), tzinfo=UTC
                )
            if self.partition and self.partition.isdigit():
                p = self.partition
                return datetime(int(p[:4]), int(p[4:6] or 1), int(p[6:8] or 1), int(p[8:10] or 0), tzinfo=UTC)
        except ValueError as exc:
            raise PathError(f"{self.uri}: the path names an impossible date ({exc})") from exc
        return None


def table_of_state_object(bucket: str, name: str, destination_regex: str | None = None) -> Table:
    """The table a state object (pointer, lock, `_BACKFILL`, gate, table-level claim) belongs to: its
    table prefix is the part of the name before `/_backlog/` or `/_turnstile/`, else its folder.
    With a destination regex the prefix must be one the regex matches as a whole table prefix (its
    `table` group ending there), at any depth; without one, the prefix's last two folders are the
    dataset (or `project.dataset`) and the table."""
    prefix = name.rpartition("/")[0]
    for marker in (f"/{BACKLOG}/", f"/{INTERNAL}/"):
        if marker in name:
            prefix = name.split(marker, 1)[0]
            break
    if destination_regex is not None:
        return _table_from_regex(bucket, prefix, name, destination_regex)
    parts = prefix.split("/")
    if len(parts) < 2 or not all(parts):
        raise PathError(
            f"gs://{bucket}/{name}: a table prefix needs at least <dataset>/<table>, found {prefix!r}; "
            "state objects must sit directly in a table folder"
        )
    return Table(
        bucket,
        prefix,
        _dataset(parts[-2], bucket, name),
        _identifier(parts[-1], "table", bucket, name),
    )


def _table_from_regex(bucket: str, prefix: str, name: str, destination_regex: str) -> Table:
    match = table_prefix_match(destination_regex, prefix)
    if match is None:
        raise PathError(
            f"gs://{bucket}/{name}: {prefix!r} is not a table prefix of the destination regex "
            f"{destination_regex!r} (DESTINATION_REGEX); state objects must sit directly in the "
            "folder its dataset and table groups name"
        )
    groups = match.groupdict()
    return Table(
        bucket,
        prefix,
        _dataset(groups.get("dataset"), bucket, name),
        _identifier(groups.get("table"), "table", bucket, name),
    )


def parse_success(bucket: str, name: str, destination_regex: str | None = None) -> Batch:
    """Parse the name of a `_SUCCESS` object (or any object in a batch folder) into its batch."""
    folder = name.rpartition("/")[0] + "/"
    where = f"gs://{bucket}/{name}"
    base = name.rpartition("/")[2]
    pattern = re.compile(destination_regex or DEFAULT_DESTINATION_REGEX)
    if "/" not in name:  # checked first: its folder, the root, would read as one empty segment
        raise PathError(
            f"{where}: a {base} at the bucket root belongs to no table; a batch path must look like "
            f"{_layout(base, destination_regex)}; move it into its batch folder"
        )
    segments = folder[:-1].split("/")  # not rstrip: `b1//_SUCCESS` has an empty segment too
    if any(s in ("", ".", "..") for s in segments):
        raise PathError(f"{where}: empty, '.' or '..' path segments are not allowed; rename the folder")
    match = pattern.search(folder)
    if match is None:
        raise PathError(
            f"{where}: the batch folder {folder!r} does not match the destination regex {pattern.pattern!r}; "
            f"expected {_layout(base, destination_regex)}"
        )
    groups = match.groupdict()
    dataset = _dataset(groups.get("dataset"), bucket, name)
    table = _identifier(groups.get("table"), "table", bucket, name)
    prefix = folder[: match.end("table")]
    rel = folder[match.end("table") :].strip("/")
    partition = groups.get("partition")
    if partition is not None:  # gcs_ocn_bq_ingest's regex captures the `$` too: read the same
        partition = partition.removeprefix("$")
    if partition is not None and (problem := partition_problem(partition)):
        raise PathError(f"{where}: {problem}")
    batch = Batch(
        table=Table(bucket, prefix, dataset, table),
        rel=rel,
        kind=groups.get("kind"),
        partition=partition,
        yyyy=groups.get("yyyy"),
        mm=groups.get("mm"),
        dd=groups.get("dd"),
        hh=groups.get("hh"),
        batch_id=groups.get("batch"),
    )
    _ = batch.natural_time  # reject impossible dates now, with the object's name
    return batch


def _layout(base: str, destination_regex: str | None) -> str:
    """What a batch path must look like, for errors about one that does not."""
    if destination_regex is None:
        return (
            f"{DEFAULT_LAYOUT}{base}, or set DESTINATION_REGEX (or destinationRegex in _config/load.json) "
            "for another layout"
        )
    return (
        f"a folder matching the destination regex {destination_regex!r} (DESTINATION_REGEX or "
        f"destinationRegex in _config/load.json) followed by {base}"
    )


def _dataset(value: str | None, bucket: str, name: str) -> str:
    """`dataset`, or `project.dataset` (the original's layout): the Iceberg namespace is the dataset."""
    if value is not None and "." in value:
        project, _, dataset = value.rpartition(".")
        if not _PROJECT.fullmatch(project):
            raise PathError(
                f"gs://{bucket}/{name}: the dataset folder {value!r} is not <dataset> or "
                "<project>.<dataset>; a project id is 6-30 lowercase letters, digits or hyphens, "
                "starting with a letter"
            )
        value = dataset
    return _identifier(value, "dataset", bucket, name)


def _identifier(value: str | None, what: str, bucket: str, name: str) -> str:
    if value is None or not IDENTIFIER.fullmatch(value):
        raise PathError(
            f"gs://{bucket}/{name}: {what} name {value!r} is not allowed; use 1-128 ASCII letters, "
            "digits or underscores, not starting with a digit (it becomes an Iceberg identifier)"
        )
    return value
