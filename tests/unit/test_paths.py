"""Object names -> tables, batches, rels and state objects (turnstile.names.paths), table-driven."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstile.core.errors import PathError, Terminal
from turnstile.names.paths import (
    ObjectKind,
    Table,
    claim_name,
    classify,
    parse_success,
    table_of_state_object,
)
from turnstile.names.uris import BucketUri, parse_bucket_uri, parse_gs_uri
from turnstile.store.memory import MemoryStore

BUCKET = "bkt"
RAW_REGEX = r"^raw/(?P<dataset>[^/]+)/(?P<table>[^/]+)/(?P<batch>[^/]+)/$"


def hour(y: int, m: int = 1, d: int = 1, h: int = 0) -> datetime:
    return datetime(y, m, d, h, tzinfo=UTC)


@dataclass(frozen=True)
class Parsed:
    """What `parse_success` must make of an accepted name."""

    prefix: str
    dataset: str
    table: str
    rel: str
    kind: str | None = None
    partition: str | None = None
    natural_time: datetime | None = None
    batch_id: str | None = None


@dataclass(frozen=True)
class Rejected:
    """`parse_success` must raise a PathError whose message holds every one of `says`."""

    says: tuple[str, ...]


def ok(name: str, expected: Parsed, id: str, regex: str | None = None) -> object:
    return pytest.param(name, regex, expected, id=id)


def bad(name: str, *says: str, id: str, regex: str | None = None) -> object:
    return pytest.param(name, regex, Rejected(says), id=id)


LAYOUTS = [
    # ---- accepted: flat
    ok("ds/tbl/_SUCCESS", Parsed("ds/tbl", "ds", "tbl", ""), id="flat"),
    ok("ds/tbl/b1/_SUCCESS", Parsed("ds/tbl", "ds", "tbl", "b1", batch_id="b1"), id="flat-batch"),
    ok(
        "ds/tbl/b1/part-00000.csv",
        Parsed("ds/tbl", "ds", "tbl", "b1", batch_id="b1"),
        id="data-file-in-batch-folder",
    ),
    ok(
        "Sales_1/Orders_V2/_SUCCESS", Parsed("Sales_1/Orders_V2", "Sales_1", "Orders_V2", ""), id="mixed-case"
    ),
    ok("_ds/_tbl/_SUCCESS", Parsed("_ds/_tbl", "_ds", "_tbl", ""), id="leading-underscore-names"),
    # ---- accepted: historical / incremental with date folders
    ok(
        "ds/tbl/historical/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "historical", kind="historical"),
        id="historical-only",
    ),
    ok(
        "ds/tbl/incremental/2024/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "incremental/2024", "incremental", natural_time=hour(2024)),
        id="inc-yyyy",
    ),
    ok(
        "ds/tbl/incremental/2024/05/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "incremental/2024/05", "incremental", natural_time=hour(2024, 5)),
        id="inc-yyyy-mm",
    ),
    ok(
        "ds/tbl/historical/2024/05/01/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "historical/2024/05/01", "historical", natural_time=hour(2024, 5, 1)),
        id="hist-yyyy-mm-dd",
    ),
    ok(
        "ds/tbl/incremental/2024/05/01/13/_SUCCESS",
        Parsed(
            "ds/tbl",
            "ds",
            "tbl",
            "incremental/2024/05/01/13",
            "incremental",
            natural_time=hour(2024, 5, 1, 13),
        ),
        id="inc-yyyy-mm-dd-hh",
    ),
    ok(
        "ds/tbl/2024/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "2024", natural_time=hour(2024)),
        id="no-kind-yyyy",
    ),
    # ---- accepted: date folders followed by a batch id
    ok(
        "ds/tbl/incremental/2024/b7/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "incremental/2024/b7", "incremental", None, hour(2024), "b7"),
        id="inc-yyyy-batch",
    ),
    ok(
        "ds/tbl/historical/2024/05/b7/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "historical/2024/05/b7", "historical", None, hour(2024, 5), "b7"),
        id="hist-yyyy-mm-batch",
    ),
    ok(
        "ds/tbl/2024/05/01/b7/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "2024/05/01/b7", None, None, hour(2024, 5, 1), "b7"),
        id="yyyy-mm-dd-batch",
    ),
    ok(
        "ds/tbl/incremental/2024/05/01/13/b7/_SUCCESS",
        Parsed(
            "ds/tbl",
            "ds",
            "tbl",
            "incremental/2024/05/01/13/b7",
            "incremental",
            None,
            hour(2024, 5, 1, 13),
            "b7",
        ),
        id="inc-yyyy-mm-dd-hh-batch",
    ),
    ok(
        "ds/tbl/2024/5/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "2024/5", natural_time=hour(2024), batch_id="5"),
        id="one-digit-month-is-a-batch-id",
    ),
    # ---- accepted: partition decorators
    ok(
        "ds/tbl/$20240501/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "$20240501", partition="20240501", natural_time=hour(2024, 5, 1)),
        id="partition-day",
    ),
    ok(
        "ds/tbl/incremental/$2024050113/_SUCCESS",
        Parsed(
            "ds/tbl",
            "ds",
            "tbl",
            "incremental/$2024050113",
            "incremental",
            "2024050113",
            hour(2024, 5, 1, 13),
        ),
        id="partition-hour",
    ),
    ok(
        "ds/tbl/$__UNPARTITIONED__/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "$__UNPARTITIONED__", partition="__UNPARTITIONED__"),
        id="partition-unpartitioned",
    ),
    ok(
        "ds/tbl/$202405/b2/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "$202405/b2", None, "202405", hour(2024, 5), "b2"),
        id="partition-month-batch",
    ),
    # ---- accepted: odd batch ids
    ok(
        "ds/tbl/incremental/2024/05/01/13/load 7 retry/_SUCCESS",
        Parsed(
            "ds/tbl",
            "ds",
            "tbl",
            "incremental/2024/05/01/13/load 7 retry",
            "incremental",
            None,
            hour(2024, 5, 1, 13),
            "load 7 retry",
        ),
        id="batch-with-spaces",
    ),
    ok(
        "ds/tbl/lot-é✓日本/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "lot-é✓日本", batch_id="lot-é✓日本"),
        id="batch-unicode",
    ),
    ok(
        "ds/tbl/٢٠٢٤/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "٢٠٢٤", batch_id="٢٠٢٤"),
        id="batch-of-arabic-indic-digits-is-not-a-year",
    ),
    # ---- accepted: folders below the batch id (gcs_ocn_bq_ingest's regex is not anchored at the
    # end: the batch id is the first folder after the date, the rel is the whole folder)
    ok(
        "ds/tbl/foo/bar/baz/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "foo/bar/baz", batch_id="foo"),
        id="folders-below-the-batch",
    ),
    ok(
        "ds/tbl/a/b/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "a/b", batch_id="a"),
        id="two-batch-levels",
    ),
    ok(
        "ds/tbl/2024/05/01/13/b1/extra/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "2024/05/01/13/b1/extra", None, None, hour(2024, 5, 1, 13), "b1"),
        id="hour-batch-and-a-folder",
    ),
    ok(
        "ds/tbl/historical/2024/b1/x/y/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "historical/2024/b1/x/y", "historical", None, hour(2024), "b1"),
        id="hist-yyyy-batch-and-folders",
    ),
    ok(
        "ds/tbl/2024/05/x/01/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "2024/05/x/01", None, None, hour(2024, 5), "x"),
        id="digits-below-the-batch-are-no-date",
    ),
    ok(
        "ds/tbl/$2024050113/b1/x/_SUCCESS",
        Parsed("ds/tbl", "ds", "tbl", "$2024050113/b1/x", None, "2024050113", hour(2024, 5, 1, 13), "b1"),
        id="partition-batch-and-a-folder",
    ),
    # ---- accepted: custom destination regex
    ok(
        "raw/ds/tbl/b1/_SUCCESS",
        Parsed("raw/ds/tbl", "ds", "tbl", "b1", batch_id="b1"),
        id="custom-regex",
        regex=RAW_REGEX,
    ),
    # ---- rejected: dataset / table names
    bad("dš/tbl/_SUCCESS", "gs://bkt/dš/tbl/_SUCCESS", "dataset", "'dš'", id="dataset-unicode"),
    bad("ds/tbł/_SUCCESS", "gs://bkt/ds/tbł/_SUCCESS", "table", "'tbł'", id="table-unicode"),
    bad("my-ds/tbl/_SUCCESS", "gs://bkt/my-ds/tbl/_SUCCESS", "dataset", "'my-ds'", id="dataset-hyphen"),
    bad("ds/my-tbl/b1/_SUCCESS", "gs://bkt/ds/my-tbl/b1/_SUCCESS", "table", "'my-tbl'", id="table-hyphen"),
    bad("my ds/tbl/_SUCCESS", "gs://bkt/my ds/tbl/_SUCCESS", "dataset", "'my ds'", id="dataset-space"),
    bad("ds/my tbl/_SUCCESS", "gs://bkt/ds/my tbl/_SUCCESS", "table", "'my tbl'", id="table-space"),
    bad(
        "1ds/tbl/_SUCCESS",
        "gs://bkt/1ds/tbl/_SUCCESS",
        "dataset",
        "'1ds'",
        "not starting with a digit",
        id="dataset-digit",
    ),
    bad("ds/2024/_SUCCESS", "gs://bkt/ds/2024/_SUCCESS", "table", "'2024'", id="table-digit"),
    bad("ds/" + "t" * 129 + "/_SUCCESS", "table", "1-128", id="table-too-long"),
    bad(
        "raw/ds/my-tbl/b1/_SUCCESS",
        "gs://bkt/raw/ds/my-tbl/b1/_SUCCESS",
        "table",
        "'my-tbl'",
        id="custom-regex-bad-table",
        regex=RAW_REGEX,
    ),
    # ---- rejected: '.', '..' and empty segments
    bad("ds/../tbl/_SUCCESS", "gs://bkt/ds/../tbl/_SUCCESS", "'..'", id="dotdot-segment"),
    bad("ds/tbl/../_SUCCESS", "gs://bkt/ds/tbl/../_SUCCESS", "'..'", id="dotdot-last"),
    bad("ds/tbl/./b1/_SUCCESS", "gs://bkt/ds/tbl/./b1/_SUCCESS", "'.'", id="dot-segment"),
    bad("ds//tbl/_SUCCESS", "gs://bkt/ds//tbl/_SUCCESS", "empty", id="double-slash-middle"),
    bad("ds/tbl//_SUCCESS", "gs://bkt/ds/tbl//_SUCCESS", "empty", id="double-slash-before-marker"),
    bad("ds/tbl/b1//_SUCCESS", "gs://bkt/ds/tbl/b1//_SUCCESS", "empty", id="double-slash-after-batch"),
    bad(
        "raw/ds/tbl/b1//_SUCCESS",
        "gs://bkt/raw/ds/tbl/b1//_SUCCESS",
        "empty",
        id="double-slash-permissive-regex",
        regex=r"^raw/(?P<dataset>[^/]+)/(?P<table>[^/]+)/(?P<batch>.+)/$",
    ),
    bad("/ds/tbl/_SUCCESS", "gs://bkt//ds/tbl/_SUCCESS", "empty", id="leading-slash"),
    # ---- rejected: names matching nothing
    bad(
        "onlyone/_SUCCESS",
        "gs://bkt/onlyone/_SUCCESS",
        "does not match",
        "destinationRegex",
        id="one-segment",
    ),
    bad("_SUCCESS", "gs://bkt/_SUCCESS", id="bucket-root"),
    bad(
        "other/ds/tbl/b1/_SUCCESS",
        "gs://bkt/other/ds/tbl/b1/_SUCCESS",
        "does not match",
        RAW_REGEX,
        id="custom-regex-no-match",
        regex=RAW_REGEX,
    ),
    # ---- rejected: partition decorators and dates
    bad(
        "ds/tbl/$abc/_SUCCESS",
        "gs://bkt/ds/tbl/$abc/_SUCCESS",
        "$abc",
        "__UNPARTITIONED__",
        id="decorator-abc",
    ),
    bad("ds/tbl/$20245/_SUCCESS", "gs://bkt/ds/tbl/$20245/_SUCCESS", "$20245", id="decorator-5-digits"),
    bad("ds/tbl/2024/13/_SUCCESS", "gs://bkt/ds/tbl/2024/13/", "impossible date", "month", id="month-13"),
    bad("ds/tbl/2024/00/_SUCCESS", "impossible date", "month", id="month-00"),
    bad(
        "ds/tbl/2023/02/29/_SUCCESS",
        "gs://bkt/ds/tbl/2023/02/29/",
        "impossible date",
        "day",
        id="feb-29-2023",
    ),
    bad("ds/tbl/2024/05/01/24/_SUCCESS", "impossible date", "hour", id="hour-24"),
    bad(
        "ds/tbl/$20241301/_SUCCESS",
        "gs://bkt/ds/tbl/$20241301/",
        "impossible date",
        "month",
        id="decorator-month-13",
    ),
]


@pytest.mark.parametrize(("name", "regex", "expected"), LAYOUTS)
def test_parse_success(name: str, regex: str | None, expected: Parsed | Rejected) -> None:
    if isinstance(expected, Rejected):
        with pytest.raises(PathError) as caught:
            parse_success(BUCKET, name, regex)
        message = str(caught.value)
        for fragment in expected.says:
            assert fragment in message, f"{fragment!r} missing from {message!r}"
        # Whatever the problem, the message points at the object (or at least its folder).
        assert f"gs://{BUCKET}/{name.rpartition('/')[0]}" in message
        assert isinstance(caught.value, Terminal)
        return
    batch = parse_success(BUCKET, name, regex)
    assert batch.table == Table(BUCKET, expected.prefix, expected.dataset, expected.table)
    assert batch.rel == expected.rel
    assert batch.kind == expected.kind
    assert batch.partition == expected.partition
    assert batch.natural_time == expected.natural_time
    assert batch.batch_id == expected.batch_id
    rel_part = f"{expected.rel}/" if expected.rel else ""
    assert batch.pointer() == f"{expected.prefix}/_backlog/{rel_part}_SUCCESS"
    assert batch.folder == f"{expected.prefix}/{rel_part}"
    assert batch.uri == f"gs://{BUCKET}/{expected.prefix}/{rel_part}"
    assert batch.success() == f"{expected.prefix}/{rel_part}_SUCCESS"
    # The batch folder of the parsed name is where it came from.
    assert name.startswith(batch.folder)
    assert "/" not in name[len(batch.folder) :]
    # Pointer and state objects lead back to the same table and rel.
    assert batch.table.rel_of_pointer(batch.pointer()) == batch.rel
    assert table_of_state_object(BUCKET, batch.pointer()) == batch.table
    assert table_of_state_object(BUCKET, batch.table.lock) == batch.table


def test_layout_table_is_big_enough() -> None:
    accepted = [p for p in LAYOUTS if isinstance(p.values[2], Parsed)]
    rejected = [p for p in LAYOUTS if isinstance(p.values[2], Rejected)]
    assert len(accepted) >= 20
    assert len(rejected) >= 20


def test_date_parts_are_kept_as_written() -> None:
    batch = parse_success(BUCKET, "ds/tbl/incremental/2024/05/01/13/b7/_SUCCESS")
    assert (batch.yyyy, batch.mm, batch.dd, batch.hh) == ("2024", "05", "01", "13")
    assert parse_success(BUCKET, "ds/tbl/2024/05/_SUCCESS").dd is None


def test_parse_success_is_deterministic_and_hashable() -> None:
    first = parse_success(BUCKET, "ds/tbl/incremental/2024/05/_SUCCESS")
    second = parse_success(BUCKET, "ds/tbl/incremental/2024/05/_SUCCESS")
    assert first == second
    assert len({first, second}) == 1
    with pytest.raises(AttributeError):
        first.rel = "other"  # type: ignore[misc]


# ---------------------------------------------------------------- Table and its state objects

TABLE = Table(BUCKET, "ds/tbl", "ds", "tbl")


def test_table_state_object_names() -> None:
    assert TABLE.uri == "gs://bkt/ds/tbl"
    assert TABLE.lock == "ds/tbl/_bqlock"
    assert TABLE.backfill == "ds/tbl/_BACKFILL"
    assert TABLE.backlog == "ds/tbl/_backlog/"
    assert TABLE.internal == "ds/tbl/_turnstile/"
    assert TABLE.gate("_HISTORYDONE") == "ds/tbl/_HISTORYDONE"
    assert TABLE.batch_folder("") == "ds/tbl/"
    assert TABLE.batch_folder("2024/05") == "ds/tbl/2024/05/"
    assert TABLE.pointer("") == "ds/tbl/_backlog/_SUCCESS"
    assert TABLE.pointer("2024/05") == "ds/tbl/_backlog/2024/05/_SUCCESS"
    assert TABLE.pointer("2024/05", "DONE") == "ds/tbl/_backlog/2024/05/DONE"


@pytest.mark.parametrize(
    "rel",
    ["", "b1", "incremental/2024/05/01/13", "$20240501", "historical/2024/b 7", "lot-é✓", "a/_SUCCESS"],
    ids=["flat", "batch", "hourly", "decorator", "space", "unicode", "marker-named-folder"],
)
@pytest.mark.parametrize("success", ["_SUCCESS", "DONE"])
def test_pointer_round_trip(rel: str, success: str) -> None:
    pointer = TABLE.pointer(rel, success)
    assert pointer.startswith(TABLE.backlog)
    assert pointer.endswith(f"/{success}")
    assert TABLE.rel_of_pointer(pointer, success) == rel
    assert classify(pointer, success) is ObjectKind.POINTER


@pytest.mark.parametrize(
    "name",
    [
        "ds/tbl/_bqlock",
        "ds/tbl/b1/_SUCCESS",
        "ds/other/_backlog/b1/_SUCCESS",
        "ds/tbl2/_backlog/b1/_SUCCESS",
        "ds/tbl/_backlog/b1/not_SUCCESS",
        "ds/tbl/_backlog/b1_SUCCESS",
        "ds/tbl/_backlog/b1/_SUCCESS.tmp",
        "ds/tbl/_backlog/",
    ],
    ids=[
        "lock",
        "batch-marker",
        "other-table",
        "prefix-sharing-table",
        "suffix-only",
        "no-slash",
        "tmp",
        "folder",
    ],
)
def test_rel_of_pointer_rejects_non_pointers(name: str) -> None:
    with pytest.raises(PathError) as caught:
        TABLE.rel_of_pointer(name)
    assert repr(name) in str(caught.value)
    assert "gs://bkt/ds/tbl" in str(caught.value)


def test_rel_of_pointer_with_custom_success_filename_rejects_default_marker() -> None:
    with pytest.raises(PathError, match="not a backlog pointer"):
        TABLE.rel_of_pointer("ds/tbl/_backlog/b1/_SUCCESS", "DONE")


@pytest.mark.parametrize(
    ("name", "prefix", "dataset", "table"),
    [
        ("ds/tbl/_backlog/_SUCCESS", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_backlog/incremental/2024/05/01/13/_SUCCESS", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_backlog/2024/_claimed__SUCCESS_created_at_9", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_bqlock", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_BACKFILL", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_HISTORYDONE", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_claimed__BACKFILL_created_at_17", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_turnstile/done/turnstile-job-1.done", "ds/tbl", "ds", "tbl"),
        ("ds/tbl/_turnstile/manifests/a/b/c.json", "ds/tbl", "ds", "tbl"),
        ("raw/ds/tbl/_bqlock", "raw/ds/tbl", "ds", "tbl"),
        ("raw/ds/tbl/_backlog/b1/_SUCCESS", "raw/ds/tbl", "ds", "tbl"),
    ],
    ids=[
        "pointer-flat",
        "pointer-hourly",
        "pointer-claim",
        "lock",
        "backfill",
        "gate",
        "table-claim",
        "job-done",
        "internal-deep",
        "custom-prefix-lock",
        "custom-prefix-pointer",
    ],
)
def test_table_of_state_object(name: str, prefix: str, dataset: str, table: str) -> None:
    assert table_of_state_object(BUCKET, name) == Table(BUCKET, prefix, dataset, table)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("_bqlock", "at least <dataset>/<table>"),
        ("tbl/_BACKFILL", "found 'tbl'"),
        ("ds//_bqlock", "found 'ds/'"),
        ("1ds/tbl/_bqlock", "dataset name '1ds'"),
        ("ds/my-tbl/_backlog/b1/_SUCCESS", "table name 'my-tbl'"),
    ],
    ids=["root", "one-level", "empty-table", "digit-dataset", "hyphen-table"],
)
def test_table_of_state_object_rejects(name: str, says: str) -> None:
    with pytest.raises(PathError) as caught:
        table_of_state_object(BUCKET, name)
    assert says in str(caught.value)
    assert f"gs://bkt/{name}" in str(caught.value)


def test_state_objects_round_trip_to_their_table() -> None:
    for table in (TABLE, Table(BUCKET, "raw/ds/tbl", "ds", "tbl")):
        for name in (
            table.lock,
            table.backfill,
            table.gate("_HISTORYDONE"),
            table.pointer(""),
            table.pointer("incremental/2024/05"),
            f"{table.internal}manifests/m.json",
            claim_name(table.backfill, 3),
            claim_name(table.pointer("b1"), 4),
        ):
            assert table_of_state_object(BUCKET, name) == table, name


# ---------------------------------------------------------------- classify

CLASSIFIED = [
    ("ds/tbl/_SUCCESS", {}, ObjectKind.SUCCESS),
    ("ds/tbl/incremental/2024/05/01/13/_SUCCESS", {}, ObjectKind.SUCCESS),
    ("ds/tbl/b1/DONE", {"success_filename": "DONE"}, ObjectKind.SUCCESS),
    ("ds/tbl/b1/_SUCCESS", {"success_filename": "DONE"}, ObjectKind.DATA),
    ("ds/tbl/_backlog/_SUCCESS", {}, ObjectKind.POINTER),
    ("ds/tbl/_backlog/2024/05/_SUCCESS", {}, ObjectKind.POINTER),
    ("ds/tbl/_backlog/2024/DONE", {"success_filename": "DONE"}, ObjectKind.POINTER),
    ("ds/tbl/_backlog/2024/_SUCCESS", {"success_filename": "DONE"}, ObjectKind.INTERNAL),
    ("ds/tbl/_backlog/2024/part-0.csv", {}, ObjectKind.INTERNAL),
    ("ds/tbl/_BACKFILL", {}, ObjectKind.BACKFILL),
    ("ds/tbl/_HISTORYDONE", {"gate_filename": "_HISTORYDONE"}, ObjectKind.GATE),
    ("ds/tbl/_HISTORYDONE", {}, ObjectKind.DATA),
    ("ds/tbl/_turnstile/done/turnstile-job-1.done", {}, ObjectKind.JOB_DONE),
    ("ds/tbl/_turnstile/manifests/m.json", {}, ObjectKind.INTERNAL),
    ("ds/tbl/_turnstile/_SUCCESS", {}, ObjectKind.INTERNAL),
    ("ds/tbl/_bqlock", {}, ObjectKind.LOCK),
    ("ds/tbl/_claimed__BACKFILL_created_at_17", {}, ObjectKind.CLAIM),
    ("ds/tbl/b1/_claimed__SUCCESS_created_at_5", {}, ObjectKind.CLAIM),
    ("ds/tbl/_backlog/b1/_claimed__SUCCESS_created_at_5", {}, ObjectKind.CLAIM),
    ("ds/tbl/_turnstile/done/_claimed_j.done_created_at_5", {}, ObjectKind.CLAIM),
    ("_config/ORDERME", {}, ObjectKind.CONFIG),
    ("ds/_config/load.json", {}, ObjectKind.CONFIG),
    ("ds/tbl/incremental/_config/transform.sql", {}, ObjectKind.CONFIG),
    ("ds/tbl/_config/_SUCCESS", {}, ObjectKind.CONFIG),
    ("ds/tbl/_config/_bqlock", {}, ObjectKind.CONFIG),
    ("ds/tbl/b1/_failed/_SUCCESS", {}, ObjectKind.INTERNAL),
    ("ds/tbl/_failed/rows.csv", {}, ObjectKind.INTERNAL),
    ("ds/tbl/_history/2024/_SUCCESS", {}, ObjectKind.INTERNAL),
    ("ds/tbl/foo/bar/baz/_SUCCESS", {}, ObjectKind.SUCCESS),
    ("ds/tbl/foo/_config/bar/_SUCCESS", {}, ObjectKind.CONFIG),
    ("ds/tbl/foo/bar/_temporary/0/_SUCCESS", {}, ObjectKind.INTERNAL),
    ("ds/tbl/b1/part-00000.csv", {}, ObjectKind.DATA),
    ("ds/tbl/b1/_SUCCESS.tmp", {}, ObjectKind.DATA),
    ("ds/tbl/b1/x_SUCCESS", {}, ObjectKind.DATA),
]


@pytest.mark.parametrize(
    ("name", "options", "kind"),
    [pytest.param(n, o, k, id=f"{k.value}:{n}:{','.join(o.values())}") for n, o, k in CLASSIFIED],
)
def test_classify(name: str, options: dict[str, str], kind: ObjectKind) -> None:
    assert classify(name, **options) is kind


def test_classify_table_covers_every_kind() -> None:
    assert {kind for _, _, kind in CLASSIFIED} == set(ObjectKind)


@pytest.mark.parametrize("kind", list(ObjectKind), ids=lambda k: k.value)
def test_is_action(kind: ObjectKind) -> None:
    actions = {  # a pointer's own event does nothing: its publisher already started a subscriber
        ObjectKind.SUCCESS,
        ObjectKind.BACKFILL,
        ObjectKind.GATE,
        ObjectKind.JOB_DONE,
    }
    assert kind.is_action is (kind in actions)


# ---------------------------------------------------------------- claims


@pytest.mark.parametrize(
    ("name", "generation", "claim"),
    [
        ("ds/tbl/_BACKFILL", 17, "ds/tbl/_claimed__BACKFILL_created_at_17"),
        ("ds/tbl/b1/_SUCCESS", 1700000000000001, "ds/tbl/b1/_claimed__SUCCESS_created_at_1700000000000001"),
        ("ds/tbl/_backlog/2024/_SUCCESS", 5, "ds/tbl/_backlog/2024/_claimed__SUCCESS_created_at_5"),
        ("top", 1, "_claimed_top_created_at_1"),
    ],
    ids=["backfill", "success", "pointer", "root"],
)
def test_claim_name(name: str, generation: int, claim: str) -> None:
    assert claim_name(name, generation) == claim


@pytest.mark.parametrize(
    "name",
    [
        "ds/tbl/b1/_SUCCESS",
        "ds/tbl/_BACKFILL",
        "ds/tbl/_HISTORYDONE",
        "ds/tbl/_turnstile/done/j.done",
    ],
)
def test_a_claim_of_an_action_object_is_a_claim_and_triggers_nothing(name: str) -> None:
    original = classify(name, gate_filename="_HISTORYDONE")
    assert original.is_action
    claim = claim_name(name, 42)
    assert claim.rpartition("/")[0] == name.rpartition("/")[0]  # beside the object it claims
    assert classify(claim, gate_filename="_HISTORYDONE") is ObjectKind.CLAIM
    assert not ObjectKind.CLAIM.is_action
    assert claim_name(name, 42) != claim_name(name, 43)


# ---------------------------------------------------------------- gs:// URIs


@pytest.mark.parametrize(
    ("uri", "bucket", "path"),
    [
        ("gs://my-bucket/a/b", "my-bucket", "a/b"),
        ("gs://my-bucket", "my-bucket", ""),
        ("gs://my-bucket/", "my-bucket", ""),
        ("gs://my.bucket.example/ds/tbl/", "my.bucket.example", "ds/tbl"),
        ("gs://abc/ds/tbl/_SUCCESS", "abc", "ds/tbl/_SUCCESS"),
        ("gs://b_1-2/x", "b_1-2", "x"),
    ],
)
def test_parse_gs_uri(uri: str, bucket: str, path: str) -> None:
    assert parse_gs_uri(uri) == (bucket, path)


@pytest.mark.parametrize(
    "uri",
    [
        "s3://bucket/x",
        "gs://",
        "gs://ab",
        "gs://My-Bucket/x",
        "gs://-bucket/x",
        "bucket/x",
        "gs:/bucket/x",
        "",
    ],
)
def test_parse_gs_uri_rejects(uri: str) -> None:
    with pytest.raises(PathError) as caught:
        parse_gs_uri(uri)
    assert repr(uri) in str(caught.value)
    assert "gs://BUCKET[/PATH]" in str(caught.value)


# ---------------------------------------------------------------- ordering properties

SAFE_CHARS = "abcxyzABZ019_-. =$é"
segment = st.text(SAFE_CHARS, min_size=1, max_size=6).filter(lambda s: s not in (".", ".."))
rels = st.lists(segment, min_size=0, max_size=4).map("/".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(rels, min_size=1, max_size=12, unique=True))
def test_backlog_listing_order_is_pointer_name_order(batch_rels: list[str]) -> None:
    store = MemoryStore(BUCKET)
    for rel in batch_rels:
        store.create(TABLE.pointer(rel), b"")
    listed = [TABLE.rel_of_pointer(info.name) for info in store.list_objects(TABLE.backlog)]
    assert listed == sorted(batch_rels, key=TABLE.pointer)
    for rel in batch_rels:
        assert TABLE.rel_of_pointer(TABLE.pointer(rel)) == rel


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.text("019azAZ_", min_size=1, max_size=4), min_size=1, max_size=3), max_size=10))
def test_pointer_order_equals_rel_order_when_no_rel_is_a_folder_of_another(paths: list[list[str]]) -> None:
    batch_rels = sorted({"/".join(p) for p in paths})
    batch_rels = [r for r in batch_rels if not any(o.startswith(r + "/") for o in batch_rels)]
    assert sorted(batch_rels, key=TABLE.pointer) == sorted(batch_rels)


@pytest.mark.parametrize(
    ("first_by_pointer", "second_by_pointer"),
    [("2024/05/01", "2024/05"), ("2024 b", "2024"), ("2024-b", "2024")],
    ids=["nested-folder", "space-suffix", "hyphen-suffix"],
)
def test_pointer_order_differs_from_plain_rel_order(first_by_pointer: str, second_by_pointer: str) -> None:
    """The backlog is listed by pointer name: a rel that is a prefix of another is NOT always first."""
    assert second_by_pointer < first_by_pointer  # plain string order of the rels
    assert TABLE.pointer(first_by_pointer) < TABLE.pointer(second_by_pointer)


layout_names = st.builds(
    lambda kind, date, batch: "ds/tbl/" + kind + date + batch + "_SUCCESS",
    st.sampled_from(["", "historical/", "incremental/"]),
    st.sampled_from(
        ["", "2024/", "2024/05/", "2024/05/01/", "2024/05/01/13/", "$20240501/", "$__UNPARTITIONED__/"]
    ),
    # A batch id of digits only could read as a month, day or hour: those are covered by LAYOUTS.
    # Folders below the batch id are part of the batch's folder, as in gcs_ocn_bq_ingest.
    st.one_of(
        st.just(""),
        st.builds(
            lambda batch, below: batch + "/" + "".join(f"{folder}/" for folder in below),
            segment.filter(lambda s: not s.startswith("$") and not s.isdigit()),
            st.lists(segment, max_size=3),
        ),
    ),
)


@settings(max_examples=200, deadline=None)
@given(layout_names)
def test_every_default_layout_round_trips(name: str) -> None:
    batch = parse_success(BUCKET, name)
    assert batch.table == TABLE
    assert batch.success() == name
    assert TABLE.rel_of_pointer(batch.pointer()) == batch.rel
    assert table_of_state_object(BUCKET, batch.pointer()) == TABLE
    assert classify(batch.pointer()) is ObjectKind.POINTER


def test_internal_objects_of_a_table_classify_and_map_back() -> None:
    done = TABLE.done_signal("turnstile-ds-tbl-1")
    assert classify(done) is ObjectKind.JOB_DONE
    assert classify(TABLE.manifest("turnstile-ds-tbl-1")) is ObjectKind.INTERNAL
    assert classify(TABLE.result("incremental/2024/05", 7)) is ObjectKind.INTERNAL
    assert classify(TABLE.failed_rows("b1") + "rows.csv") is ObjectKind.INTERNAL
    for name in (done, TABLE.manifest("j"), TABLE.result("", 1), TABLE.result("a/b", 2)):
        assert name.startswith(TABLE.internal)
        assert table_of_state_object(BUCKET, name) == TABLE


GS_URIS = [
    "gs://my-bucket/a/b",
    "gs://my-bucket",
    "gs://my-bucket/",
    "gs://b_1-2/x",
    "gs://my.bucket.example/ds/",
]


@pytest.mark.parametrize("uri", GS_URIS)
def test_the_scheme_aware_parse_reads_gs_uris_exactly_as_before(uri: str) -> None:
    assert parse_bucket_uri(uri) == BucketUri("gs", *parse_gs_uri(uri))


@pytest.mark.parametrize("uri", ["gs://", "gs://ab", "gs://My-Bucket/x", "gs://-bucket/x"])
def test_the_scheme_aware_parse_rejects_what_parse_gs_uri_rejects(uri: str) -> None:
    with pytest.raises(PathError, match=re.escape(repr(uri))):
        parse_bucket_uri(uri)


@pytest.mark.parametrize(
    ("uri", "bucket", "path"),
    [
        ("s3://my-bucket/a/b", "my-bucket", "a/b"),
        ("s3://my-bucket", "my-bucket", ""),
        ("s3://my.bucket/ds/tbl/", "my.bucket", "ds/tbl"),
        ("s3://abc/sales/orders/batch one/_SUCCESS", "abc", "sales/orders/batch one/_SUCCESS"),
    ],
)
def test_s3_uris(uri: str, bucket: str, path: str) -> None:
    assert parse_bucket_uri(uri) == BucketUri("s3", bucket, path)


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("s3://ab/x", "S3 bucket names are 3-63 lowercase letters, digits, dots and hyphens"),
        ("s3://My-Bucket/x", "is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI"),
        ("s3://b_1/x", "is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI"),  # no underscores on S3
        (f"s3://{'a' * 64}", "3-63"),
        ("az://bucket/x", "the scheme az:// is not supported; use gs://BUCKET or s3://BUCKET"),
        ("bucket/x", "is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI"),
    ],
)
def test_bad_bucket_uris_say_what_is_wrong(uri: str, says: str) -> None:
    with pytest.raises(PathError) as caught:
        parse_bucket_uri(uri)
    assert says in str(caught.value)
    assert repr(uri) in str(caught.value)


def test_a_project_qualified_dataset_folder_names_the_dataset_part() -> None:
    batch = parse_success("b", "my-proj.sales/orders/2024/01/01/00/_SUCCESS")
    assert (batch.table.prefix, batch.table.dataset, batch.table.table) == (
        "my-proj.sales/orders",
        "sales",
        "orders",
    )
    lock = table_of_state_object("b", "my-proj.sales/orders/_backlog/2024/01/01/00/_SUCCESS")
    assert lock == batch.table


def test_a_dataset_folder_with_a_bad_project_names_the_folder_and_the_rule() -> None:
    with pytest.raises(PathError, match=r"'Bad_Proj\.sales' is not <dataset> or <project>\.<dataset>"):
        table_of_state_object("b", "Bad_Proj.sales/orders/_bqlock")


def test_a_custom_regex_finds_the_table_of_a_state_object_at_any_depth_by_its_groups() -> None:
    regex = r"^landing/(?P<dataset>[^/]+)/feeds/(?P<table>[^/]+)/(?:(?P<batch>[^/]+)/)?$"
    table = table_of_state_object("b", "landing/sales/feeds/orders/_turnstile/jobs/j.done", regex)
    assert (table.prefix, table.dataset, table.table) == ("landing/sales/feeds/orders", "sales", "orders")
    assert parse_success("b", "landing/sales/feeds/orders/b1/_SUCCESS", regex).table == table
    with pytest.raises(PathError, match="is not a table prefix of the destination regex"):
        table_of_state_object("b", "landing/sales/_BACKFILL", regex)


def test_a_bucket_name_gcs_would_refuse_is_named_with_the_rule() -> None:
    with pytest.raises(PathError, match=r"bucket name 'x' is not one \(3 to 222 lowercase letters"):
        parse_gs_uri("gs://x/a/b/_SUCCESS")
    with pytest.raises(PathError, match=r"is not a gs://BUCKET\[/PATH\] URI$"):
        parse_gs_uri("http://x/a")
