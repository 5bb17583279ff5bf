"""The `_config/` cascade (turnstile.config.cascade) over the in-memory store."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from turnstile.config.cascade import ConfigReader, deep_merge, levels
from turnstile.config.load_config import LoadConfig
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import ConfigError, Terminal
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import parse_success
from turnstile.protocol.context import Invocation
from turnstile.protocol.manifests import manifest_batch
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ListedObject, ObjectInfo, StoredObject

BUCKET = "bkt"


class CountingStore(MemoryStore):
    """A MemoryStore that counts listings (by prefix) and reads (by name)."""

    def __init__(self, bucket: str = BUCKET) -> None:
        super().__init__(bucket)
        self.listed: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.vanish: set[str] = set()  # names that disappear between listing and reading

    def list_objects(
        self, prefix: str, *, start_offset: str | None = None, limit: int | None = None
    ) -> list[ObjectInfo]:
        self.listed[prefix] += 1
        return super().list_objects(prefix, start_offset=start_offset, limit=limit)

    def list_entries(
        self,
        prefix: str,
        *,
        start_offset: str | None = None,
        end_offset: str | None = None,
        limit: int | None = None,
    ) -> list[ListedObject]:
        self.listed[prefix] += 1
        return super().list_entries(prefix, start_offset=start_offset, end_offset=end_offset, limit=limit)

    def read(self, name: str) -> StoredObject | None:
        self.reads[name] += 1
        return None if name in self.vanish else super().read(name)


def make_store(files: dict[str, Any]) -> CountingStore:
    """Objects from a dict: dicts and lists become JSON, str and bytes are stored as they are."""
    store = CountingStore()
    for name, content in files.items():
        if isinstance(content, (dict, list)):
            data = json.dumps(content).encode()
        elif isinstance(content, str):
            data = content.encode()
        else:
            data = content
        store.write(name, data)
    return store


def resolve(files: dict[str, Any], folder: str) -> Any:
    return ConfigReader(make_store(files)).resolve(folder)


# ---------------------------------------------------------------- precedence


CASCADE = {
    "_config/load.json": {"format": "json", "max_bad_records": 1, "time_column": "root_ts"},
    "ds/tbl/_config/load.json": {"format": "parquet", "max_bad_records": 2},
    "ds/tbl/incremental/b1/_config/load.json": {"max_bad_records": 3},
}


@pytest.mark.parametrize(
    ("folder", "fmt", "bad_records", "time_column"),
    [
        ("ds/tbl/incremental/b1/", "parquet", 3, "root_ts"),
        ("ds/tbl/incremental/b2/", "parquet", 2, "root_ts"),
        ("ds/tbl/", "parquet", 2, "root_ts"),
        ("ds/other/b1/", "json", 1, "root_ts"),
        ("ds2/tbl/b1/", "json", 1, "root_ts"),
    ],
    ids=[
        "batch-folder-wins",
        "table-over-root",
        "flat-table-folder",
        "other-table-root",
        "other-dataset-root",
    ],
)
def test_nearer_load_json_overrides_farther(
    folder: str, fmt: str, bad_records: int, time_column: str
) -> None:
    load = resolve(CASCADE, folder).load
    assert load.format == fmt
    assert load.max_bad_records == bad_records
    assert load.time_column == time_column
    assert load.mode == "append"  # untouched default


def test_sources_are_listed_farthest_first() -> None:
    resolved = resolve(CASCADE, "ds/tbl/incremental/b1/")
    assert resolved.sources == (
        "_config/load.json",
        "ds/tbl/_config/load.json",
        "ds/tbl/incremental/b1/_config/load.json",
    )


def test_precedence_does_not_depend_on_reading_order() -> None:
    """Resolving the deep folder first, then the shallow one, must not leak the deep values."""
    reader = ConfigReader(make_store(CASCADE))
    assert reader.resolve("ds/tbl/incremental/b1/").load.max_bad_records == 3
    assert reader.resolve("ds/tbl/").load.max_bad_records == 2
    assert reader.resolve("ds/x/").load.max_bad_records == 1


def test_nested_objects_deep_merge_and_lists_are_replaced() -> None:
    files = {
        "_config/load.json": {
            "reader_options": {"delimiter": ";", "header": "true"},
            "table_properties": {"format-version": "2", "write.format.default": "parquet"},
            "partition_by": ["days(ts)", "bucket(4, id)"],
            "merge_keys": ["id", "region"],
            "mode": "merge",
        },
        "ds/tbl/_config/load.json": {
            "reader_options": {"header": False, "quote": "'"},
            "table_properties": {"write.format.default": "orc"},
            "partition_by": ["hours(ts)"],
            "merge_keys": ["id"],
        },
    }
    load = resolve(files, "ds/tbl/b1/").load
    assert load.reader_options == {"delimiter": ";", "header": False, "quote": "'"}
    assert load.table_properties == {"format-version": "2", "write.format.default": "orc"}
    assert load.partition_by == ("hours(ts)",)
    assert load.merge_keys == ("id",)
    assert load.mode == "merge"


def test_an_empty_list_nearer_replaces_a_farther_list() -> None:
    files = {
        "_config/load.json": {"partition_by": ["days(ts)"]},
        "ds/tbl/_config/load.json": {"partition_by": []},
    }
    assert resolve(files, "ds/tbl/b1/").load.partition_by == ()


@pytest.mark.parametrize(
    ("far", "near", "merged"),
    [
        ({"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
        ({"a": 1}, {"a": 2}, {"a": 2}),
        (
            {"a": {"x": 1, "y": {"p": 1, "q": 2}}},
            {"a": {"y": {"q": 3}}},
            {"a": {"x": 1, "y": {"p": 1, "q": 3}}},
        ),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": {"x": 1}}, {"a": 5}, {"a": 5}),
        ({"a": 5}, {"a": {"x": 1}}, {"a": {"x": 1}}),
        ({"a": {"x": 1}}, {"a": None}, {"a": None}),
        ({}, {}, {}),
    ],
    ids=["disjoint", "scalar", "nested", "list", "scalar-over-object", "object-over-scalar", "null", "empty"],
)
def test_deep_merge(far: dict[str, Any], near: dict[str, Any], merged: dict[str, Any]) -> None:
    far_before, near_before = json.dumps(far), json.dumps(near)
    assert deep_merge(far, near) == merged
    assert (json.dumps(far), json.dumps(near)) == (far_before, near_before)  # inputs untouched


def test_either_spelling_of_an_aliased_key_overrides_the_other() -> None:
    regex_far = r"^(?P<dataset>[^/]+)/(?P<table>[^/]+)/far/$"
    regex_near = r"^(?P<dataset>[^/]+)/(?P<table>[^/]+)/near/$"
    files = {
        "_config/load.json": {"destinationRegex": regex_far, "schema": "id INT"},
        "ds/_config/load.json": {"destination_regex": regex_near, "schema_": "id BIGINT"},
    }
    load = resolve(files, "ds/tbl/")
    assert load.load.destination_regex == regex_near
    assert load.load.schema_ == "id BIGINT"
    reverse = {
        "_config/load.json": {"destination_regex": regex_far},
        "ds/_config/load.json": {"destinationRegex": regex_near},
    }
    assert resolve(reverse, "ds/tbl/").load.destination_regex == regex_near


def test_flat_layout_reads_the_table_folders_own_config() -> None:
    files = {
        "_config/load.json": {"format": "json"},
        "ds/tbl/_config/load.json": {"format": "orc"},
        "ds/tbl/_config/transform.sql": "SELECT * FROM batch WHERE ok",
        "ds/tbl/_config/ORDERME": "",
    }
    batch = parse_success(BUCKET, "ds/tbl/_SUCCESS")
    assert batch.folder == "ds/tbl/"
    resolved = resolve(files, batch.folder)
    assert resolved.load.format == "orc"
    assert resolved.transform_sql == "SELECT * FROM batch WHERE ok"
    assert resolved.ordered is True


def test_folder_without_trailing_slash_resolves_the_same() -> None:
    assert resolve(CASCADE, "ds/tbl").load.max_bad_records == 2


def test_no_config_anywhere_gives_defaults() -> None:
    resolved = resolve({"ds/tbl/b1/part-0.csv": "a,b"}, "ds/tbl/b1/")
    assert resolved.load == LoadConfig()
    assert resolved.load.format == "csv"
    assert resolved.load.max_batches_per_job == 10
    assert resolved.transform_sql is None
    assert resolved.ordered is False
    assert resolved.sources == ()


def test_files_in_sub_folders_of_config_do_not_count() -> None:
    files = {
        "ds/tbl/_config/old/load.json": {"format": "orc"},
        "ds/tbl/_config/archive/ORDERME": "",
        "ds/tbl/_config/drafts/transform.sql": "SELECT 1",
        "ds/tbl/_config/ORDERME.bak": "",
        "ds/tbl/_config/README.md": "notes",
    }
    resolved = resolve(files, "ds/tbl/b1/")
    assert resolved.load.format == "csv"
    assert resolved.ordered is False
    assert resolved.transform_sql is None
    assert resolved.sources == ()


def test_a_config_object_deleted_between_list_and_read_is_as_if_absent() -> None:
    store = make_store(
        {"ds/_config/load.json": {"format": "orc"}, "ds/tbl/_config/load.json": {"format": "json"}}
    )
    store.vanish.add("ds/tbl/_config/load.json")
    resolved = ConfigReader(store).resolve("ds/tbl/b1/")
    assert resolved.load.format == "orc"
    assert resolved.sources == ("ds/_config/load.json",)


def test_returned_config_cannot_corrupt_the_next_lookup() -> None:
    """The original kept a module-level default dict that one invocation mutated for the next."""
    files = {"ds/tbl/_config/load.json": {"reader_options": {"delimiter": ";"}}}
    reader = ConfigReader(make_store(files))
    first = reader.resolve("ds/tbl/b1/")
    first.load.reader_options["delimiter"] = "|"
    first.load.reader_options["injected"] = True
    assert reader.resolve("ds/tbl/b2/").load.reader_options == {"delimiter": ";"}
    assert reader.resolve("ds/tbl/b1/").load.reader_options == {"delimiter": ";"}
    assert ConfigReader(make_store({})).resolve("ds/tbl/b1/").load.reader_options == {}


# ---------------------------------------------------------------- transform.sql and ORDERME


@pytest.mark.parametrize(
    ("files", "folder", "sql"),
    [
        ({"_config/transform.sql": "SELECT 1"}, "ds/tbl/b1/", "SELECT 1"),
        (
            {"_config/transform.sql": "SELECT 1", "ds/tbl/_config/transform.sql": "SELECT 2"},
            "ds/tbl/b1/",
            "SELECT 2",
        ),
        (
            {
                "_config/transform.sql": "SELECT 1",
                "ds/tbl/_config/transform.sql": "SELECT 2",
                "ds/tbl/b1/_config/transform.sql": "SELECT 3",
            },
            "ds/tbl/b1/",
            "SELECT 3",
        ),
        ({"ds/tbl/b1/_config/transform.sql": "SELECT 3"}, "ds/tbl/b2/", None),
        ({"ds/other/_config/transform.sql": "SELECT 9"}, "ds/tbl/b1/", None),
        ({"ds/_config/transform.sql": "SELECT ü FROM batch"}, "ds/tbl/", "SELECT ü FROM batch"),
    ],
    ids=[
        "root",
        "table-over-root",
        "batch-over-table",
        "sibling-batch-ignored",
        "other-table-ignored",
        "utf8",
    ],
)
def test_nearest_transform_sql_wins(files: dict[str, str], folder: str, sql: str | None) -> None:
    assert resolve(files, folder).transform_sql == sql


@pytest.mark.parametrize(
    ("orderme", "folder", "ordered"),
    [
        ("_config/ORDERME", "ds/tbl/incremental/2024/05/", True),
        ("_config/ORDERME", "other/tbl/", True),
        ("ds/tbl/_config/ORDERME", "ds/tbl/incremental/2024/05/", True),
        ("ds/tbl/_config/ORDERME", "ds/tbl/", True),
        ("ds/tbl/_config/ORDERME", "ds/tbl2/b1/", False),
        ("ds/tbl/incremental/_config/ORDERME", "ds/tbl/incremental/2024/05/", True),
        ("ds/tbl/incremental/_config/ORDERME", "ds/tbl/incremental/", True),
        ("ds/tbl/incremental/_config/ORDERME", "ds/tbl/historical/2024/05/", False),
        ("ds/tbl/incremental/_config/ORDERME", "ds/tbl/", False),
        ("ds/tbl/incremental/_config/ORDERME", "ds/tbl/incremental2/b1/", False),
        (None, "ds/tbl/incremental/2024/05/", False),
    ],
    ids=[
        "root-deep",
        "root-other-dataset",
        "table-deep",
        "table-flat",
        "table-prefix-sharing-sibling",
        "below-table-inside",
        "below-table-itself",
        "below-table-sibling-folder",
        "below-table-flat-batch",
        "below-table-prefix-sharing",
        "absent",
    ],
)
def test_orderme(orderme: str | None, folder: str, ordered: bool) -> None:
    files: dict[str, Any] = {"ds/tbl/_config/load.json": {"format": "csv"}}
    if orderme:
        files[orderme] = b""
    resolved = resolve(files, folder)
    assert resolved.ordered is ordered
    assert (orderme in resolved.sources) is ordered


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"mode": ', ("is not valid JSON",)),
        (b"\xff\xfe{", ("is not valid JSON",)),
        (b"", ("is not valid JSON",)),
        (b"[1, 2]", ("must hold a JSON object", "found list")),
        (b'"append"', ("must hold a JSON object", "found str")),
        (b"null", ("must hold a JSON object", "found NoneType")),
        (
            b'{"modee": "merge"}',
            ("'modee'", "not a known key", "'merge'", "known keys:", "mode", "destinationRegex"),
        ),
        (b'{"max_bad_records": "lots"}', ("'max_bad_records'", "'lots'", "integer")),
        (b'{"max_bad_records": -1}', ("'max_bad_records'", "-1", "greater than or equal to 0")),
        (b'{"max_batches_per_job": 101}', ("'max_batches_per_job'", "101", "less than or equal to 100")),
        (b'{"mode": "upsert"}', ("'mode'", "'upsert'", "'append'", "'merge'", "'overwrite'")),
        (b'{"format": "xlsx"}', ("'format'", "'xlsx'", "'parquet'")),
        (b'{"merge_keys": "id"}', ("'merge_keys'", "'id'")),
        (b'{"reader_options": {"sep": [1]}}', ("reader_options.sep", "[1]")),
        (b'{"schema_evolution": true}', ("'schema_evolution'", "True")),
        (
            b'{"expectations": [{"name": "a", "check": "x > 0", "on_fail": "skip"}]}',
            ("'expectations[0].on_fail'", "'skip'", "'warn', 'drop' or 'fail'"),
        ),
        (b'{"expectations": [{"name": "a", "check": "x > 0"}]}', ("'expectations[0].on_fail' is required",)),
        (
            b'{"expectations": [{"name": "a", "check": "x > 0", "on_fail": "warn"}, '
            b'{"name": "a", "check": "y > 0", "on_fail": "drop"}]}',
            ("expectations[1].name 'a' is used twice",),
        ),
        (
            b'{"expectations": [{"name": "a b", "check": " ", "on_fail": "warn"}]}',
            ("'expectations[0].name'", "'a b'", "'expectations[0].check'", "check is blank"),
        ),
    ],
    ids=[
        "truncated-json",
        "not-utf8",
        "empty-file",
        "json-list",
        "json-string",
        "json-null",
        "unknown-key",
        "wrong-type",
        "below-minimum",
        "above-maximum",
        "bad-mode",
        "bad-format",
        "string-for-list",
        "nested-wrong-type",
        "bool-for-enum",
        "expectation-bad-on-fail",
        "expectation-no-on-fail",
        "expectation-names-repeated",
        "expectation-bad-name-blank-check",
    ],
)
@pytest.mark.parametrize(
    "where", ["_config/load.json", "ds/tbl/_config/load.json", "ds/tbl/b1/_config/load.json"]
)
def test_a_bad_load_json_names_the_file_the_key_and_the_value(
    content: bytes, says: tuple[str, ...], where: str
) -> None:
    store = make_store({where: content, "ds/_config/load.json": {"format": "json"}})
    with pytest.raises(ConfigError) as caught:
        ConfigReader(store).resolve("ds/tbl/b1/")
    message = str(caught.value)
    assert f"gs://{BUCKET}/{where}" in message
    assert "gs://bkt/ds/_config/load.json" not in message  # the good file is not blamed
    for fragment in says:
        assert fragment in message, f"{fragment!r} missing from {message!r}"
    assert isinstance(caught.value, Terminal)


def test_a_bad_file_elsewhere_does_not_break_other_tables() -> None:
    store = make_store({"ds/broken/_config/load.json": b"{", "ds/tbl/_config/load.json": {"format": "orc"}})
    assert ConfigReader(store).resolve("ds/tbl/b1/").load.format == "orc"


def test_a_bad_transform_sql_is_not_a_load_json_error() -> None:
    resolved = resolve({"ds/tbl/_config/transform.sql": "{not json"}, "ds/tbl/b1/")
    assert resolved.transform_sql == "{not json"


def test_cross_key_rules_apply_to_the_merged_result_and_name_every_file() -> None:
    files = {
        "_config/load.json": {"mode": "merge"},
        "ds/tbl/_config/load.json": {"format": "json"},
        "ds/tbl/_config/transform.sql": "SELECT 1",
    }
    with pytest.raises(ConfigError) as caught:
        resolve(files, "ds/tbl/b1/")
    message = str(caught.value)
    assert "gs://bkt/ds/tbl/b1/" in message
    assert "gs://bkt/_config/load.json" in message
    assert "gs://bkt/ds/tbl/_config/load.json" in message
    assert "transform.sql" not in message
    assert "merge_keys" in message
    assert "mode 'merge'" in message


def test_a_nearer_file_can_complete_a_farther_partial_one() -> None:
    files = {"_config/load.json": {"mode": "merge"}, "ds/tbl/_config/load.json": {"merge_keys": ["id"]}}
    load = resolve(files, "ds/tbl/b1/").load
    assert (load.mode, load.merge_keys) == ("merge", ("id",))
    with pytest.raises(ConfigError, match="merge_keys"):
        resolve(files, "ds/other/b1/")


def test_merge_only_options_without_merge_mode_are_rejected() -> None:
    files = {
        "ds/_config/load.json": {"merge_order_by": "ts"},
        "ds/tbl/_config/load.json": {"delete_column": "d"},
    }
    with pytest.raises(ConfigError) as caught:
        resolve(files, "ds/tbl/")
    message = str(caught.value)
    assert "merge_order_by and delete_column only apply to mode 'merge'" in message
    assert "gs://bkt/ds/_config/load.json, gs://bkt/ds/tbl/_config/load.json" in message


def test_orderme_alone_keeps_the_default_load() -> None:
    resolved = resolve({"_config/ORDERME": ""}, "ds/tbl/")
    assert resolved.load == LoadConfig()
    assert resolved.sources == ("_config/ORDERME",)


# ---------------------------------------------------------------- cost: reads per invocation


def test_each_config_folder_is_read_at_most_once_per_reader() -> None:
    store = make_store(
        {
            "_config/load.json": {"format": "json"},
            "ds/tbl/_config/load.json": {"max_bad_records": 2},
            "ds/tbl/_config/transform.sql": "SELECT 1",
            "ds/tbl/_config/ORDERME": "",
            "ds/tbl/b1/_config/load.json": {"max_bad_records": 3},
            "ds/tbl/b1/part-0.csv": "a",
            "ds/tbl/b2/part-0.csv": "a",
        }
    )
    reader = ConfigReader(store)
    first = reader.resolve("ds/tbl/b1/")
    second = reader.resolve("ds/tbl/b2/")
    assert (first.load.max_bad_records, second.load.max_bad_records) == (3, 2)
    assert store.listed == Counter(
        {
            "_config/": 1,
            "ds/_config/": 1,
            "ds/tbl/_config/": 1,
            "ds/tbl/b1/_config/": 1,
            "ds/tbl/b2/_config/": 1,
        }
    )
    assert store.reads == Counter(
        {
            "_config/load.json": 1,
            "ds/tbl/_config/load.json": 1,
            "ds/tbl/_config/transform.sql": 1,
            "ds/tbl/b1/_config/load.json": 1,
        }
    )
    # Resolving again costs nothing more.
    reader.resolve("ds/tbl/b1/")
    assert sum(store.listed.values()) == 5
    assert sum(store.reads.values()) == 4


def test_nothing_is_cached_across_readers() -> None:
    store = make_store({"_config/load.json": {"format": "json"}})
    old = ConfigReader(store)
    assert old.resolve("ds/tbl/b1/").load.format == "json"
    store.write("_config/load.json", json.dumps({"format": "orc"}).encode())
    store.write("ds/tbl/_config/ORDERME", b"")
    fresh = ConfigReader(store).resolve("ds/tbl/b1/")
    assert fresh.load.format == "orc"
    assert fresh.ordered is True
    assert store.listed["_config/"] == 2
    assert store.reads["_config/load.json"] == 2
    # One reader is one invocation's consistent view: it keeps what it read.
    assert old.resolve("ds/tbl/b1/").load.format == "json"


# ---------------------------------------------------------------- digest


def test_digest_is_stable_and_independent_of_where_or_how_a_value_is_written() -> None:
    a = resolve({"_config/load.json": {"format": "json", "mode": "append"}}, "ds/tbl/b1/")
    b = resolve({"ds/tbl/b1/_config/load.json": {"mode": "append", "format": "json"}}, "ds/tbl/b1/")
    c = resolve({"_config/load.json": {"format": "json", "mode": "append"}}, "ds/tbl/b1/")
    assert a.digest == b.digest == c.digest
    assert len(a.digest) == 16
    assert int(a.digest, 16) >= 0
    explicit_defaults = resolve({"_config/load.json": {"format": "csv", "mode": "append"}}, "x/y/")
    assert explicit_defaults.digest == resolve({}, "x/y/").digest


@pytest.mark.parametrize(
    "change",
    [
        {"_config/load.json": {"format": "json", "max_bad_records": 1}},
        {"_config/load.json": {"format": "parquet"}},
        {"_config/load.json": {"format": "json", "reader_options": {"sep": ";"}}},
        {"_config/load.json": {"format": "json"}, "ds/_config/transform.sql": "SELECT 1"},
        {"_config/load.json": {"format": "json", "partition_by": ["days(ts)"]}},
    ],
    ids=["scalar", "format", "nested", "transform", "list"],
)
def test_digest_changes_when_the_config_changes(change: dict[str, Any]) -> None:
    base = resolve({"_config/load.json": {"format": "json"}}, "ds/tbl/b1/")
    assert resolve(change, "ds/tbl/b1/").digest != base.digest


def test_digest_ignores_ordering_which_is_not_part_of_what_the_job_does() -> None:
    plain = resolve({"_config/load.json": {"format": "json"}}, "ds/tbl/b1/")
    ordered = resolve({"_config/load.json": {"format": "json"}, "_config/ORDERME": ""}, "ds/tbl/b1/")
    assert ordered.ordered and not plain.ordered
    assert ordered.digest == plain.digest


# ---------------------------------------------------------------- levels


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("", [""]),
        ("ds/", ["", "ds/"]),
        ("ds/tbl/", ["", "ds/", "ds/tbl/"]),
        ("ds/tbl", ["", "ds/", "ds/tbl/"]),
        (
            "ds/tbl/incremental/2024/05/",
            [
                "",
                "ds/",
                "ds/tbl/",
                "ds/tbl/incremental/",
                "ds/tbl/incremental/2024/",
                "ds/tbl/incremental/2024/05/",
            ],
        ),
    ],
    ids=["root", "dataset", "table", "no-trailing-slash", "deep"],
)
def test_levels(folder: str, expected: list[str]) -> None:
    assert levels(folder) == expected


def test_the_manifest_names_the_transform_sql_in_force() -> None:
    store = make_store(
        {
            "_config/transform.sql": "SELECT 1",
            "ds/tbl/_config/transform.sql": "SELECT 2",
            "ds/tbl/b1/_config/load.json": {"format": "csv"},
        }
    )
    resolved = ConfigReader(store).resolve("ds/tbl/b1/")
    assert resolved.transform_source == "ds/tbl/_config/transform.sql"
    clock = SystemClock()
    runner = InlineRunner(store, MemoryTables())
    inv = Invocation(store, runner, Settings.from_env({}), clock, "i", clock.now())
    batch = manifest_batch(inv, parse_success(store.bucket, "ds/tbl/b1/_SUCCESS"), resolved, 7, data_uris=())
    assert batch.transform_source == f"gs://{store.bucket}/ds/tbl/_config/transform.sql"
    assert ConfigReader(make_store({})).resolve("ds/tbl/b1/").transform_source is None


def test_the_manifest_names_the_load_json_whose_mapping_is_in_force() -> None:
    store = make_store(
        {
            "ds/_config/load.json": {"mapping": [{"remove": "x"}]},
            "ds/tbl/_config/load.json": {"mapping": [{"remove": "y"}]},  # replaces the list whole
            "ds/tbl/b1/_config/load.json": {"format": "csv"},
        }
    )
    resolved = ConfigReader(store).resolve("ds/tbl/b1/")
    assert resolved.mapping_source == "ds/tbl/_config/load.json"
    clock = SystemClock()
    inv = Invocation(
        store, InlineRunner(store, MemoryTables()), Settings.from_env({}), clock, "i", clock.now()
    )
    batch = manifest_batch(inv, parse_success(store.bucket, "ds/tbl/b1/_SUCCESS"), resolved, 7, data_uris=())
    assert batch.mapping_source == f"gs://{store.bucket}/ds/tbl/_config/load.json"
    assert ConfigReader(make_store({})).resolve("ds/tbl/b1/").mapping_source is None


# ---------------------------------------------------------------- bq_transform.sql, nested, jagged_rows
def test_bq_transform_sql_is_read_as_transform_sql() -> None:
    files = {"ds/tbl/_config/bq_transform.sql": "SELECT * FROM batch"}
    resolved = resolve(files, "ds/tbl/b1/")
    assert resolved.transform_sql == "SELECT * FROM batch"
    assert resolved.sources == ("ds/tbl/_config/bq_transform.sql",)


def test_a_nearer_transform_sql_overrides_a_farther_bq_transform_sql() -> None:
    files = {"ds/_config/bq_transform.sql": "SELECT 1", "ds/tbl/_config/transform.sql": "SELECT 2"}
    assert resolve(files, "ds/tbl/b1/").transform_sql == "SELECT 2"


def test_both_names_in_one_config_folder_is_an_error_naming_both() -> None:
    files = {"ds/tbl/_config/transform.sql": "SELECT 1", "ds/tbl/_config/bq_transform.sql": "SELECT 2"}
    with pytest.raises(
        ConfigError, match=r"gs://bkt/ds/tbl/_config/ holds both transform.sql and bq_transform.sql"
    ):
        resolve(files, "ds/tbl/b1/")


@pytest.mark.parametrize(
    ("load", "nested"),
    [
        ({"format": "parquet"}, True),
        ({"format": "orc"}, True),
        ({"format": "avro"}, True),
        ({"format": "csv"}, False),
        ({"format": "json"}, False),
        ({"format": "text"}, False),
        ({"format": "parquet", "nested": False}, False),
        ({"format": "csv", "nested": True}, True),
    ],
)
def test_nested_defaults_by_format_and_can_be_set(load: dict[str, Any], nested: bool) -> None:
    assert resolve({"ds/_config/load.json": load}, "ds/tbl/b1/").load.nested_folders is nested


def test_jagged_rows_is_for_csv_only() -> None:
    files = {"ds/_config/load.json": {"jagged_rows": True}, "ds/tbl/_config/load.json": {"format": "json"}}
    with pytest.raises(ConfigError, match="jagged_rows only applies to format 'csv'"):
        resolve(files, "ds/tbl/b1/")
    assert resolve({"ds/_config/load.json": {"jagged_rows": True}}, "ds/tbl/b1/").load.jagged_rows


def test_overwrite_partitions_is_a_mode() -> None:
    resolved = resolve({"ds/_config/load.json": {"mode": "overwrite_partitions"}}, "ds/tbl/b1/")
    assert resolved.load.mode == "overwrite_partitions"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("merge_orders.sql", "only transform.sql (or its alias bq_transform.sql) is read as the transform"),
        ("external.json", "turnstile does not read external.json: move its settings"),
    ],
)
def test_a_config_file_the_original_read_is_refused_not_ignored(name: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve({f"ds/tbl/_config/{name}": "SELECT 1"}, "ds/tbl/b1/")
    assert str(caught.value).startswith(f"gs://{BUCKET}/ds/tbl/_config/{name}: {says}")
    assert resolve({"ds/tbl/_config/README.md": "notes"}, "ds/tbl/b1/").sources == ()  # others: ignored
