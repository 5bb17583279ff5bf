"""The `mapping` list of load.json: its entries validated, and played over field trees without data."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from turnstile.config.cascade import ConfigReader, _parse_load_json
from turnstile.config.ddl import fields as ddl_fields
from turnstile.config.load_config import LoadConfig
from turnstile.config.mapping import Cast, Constant, Default, FromPath, Remove, Rename, known_type
from turnstile.config.mapping_fields import (
    check,
    lookup,
    path_value,
    play,
    removal,
    sample_fields,
)
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import ConfigError
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import parse_success
from turnstile.protocol.context import Invocation
from turnstile.protocol.manifests import manifest_batch
from turnstile.spark.mapping import field_sql, try_cast_sql
from turnstile.state.records import ManifestBatch
from turnstile.store.memory import MemoryStore

EVERY_KIND = [
    {"rename": "payload.user.id", "to": "user_id"},
    {"remove": "debug"},
    {"cast": "amount", "type": "decimal(10,2)"},
    {"constant": "source", "value": "web"},
    {"default": "country", "value": "US"},
    {"from_path": "time", "to": "batch_hour"},
    {"from_path": "regex", "regex": r"^(?P<region>[a-z]+)/", "group": "region", "to": "region"},
]


def problem(entries: list[object]) -> str:
    with pytest.raises(ConfigError) as caught:
        _parse_load_json("gs://b/ds/t/_config/load.json", json.dumps({"mapping": entries}).encode())
    return str(caught.value)


def test_every_kind_is_read_into_its_own_type_and_written_back_as_load_json_spells_it() -> None:
    load = LoadConfig.model_validate({"mapping": EVERY_KIND})
    assert [type(e) for e in load.mapping] == [Rename, Remove, Cast, Constant, Default, FromPath, FromPath]
    dumped = load.model_dump(mode="json", by_alias=True, exclude_none=True)["mapping"]
    assert dumped == EVERY_KIND
    assert LoadConfig.model_validate({"mapping": dumped}) == load  # the manifest carries it unchanged


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"rename": "a"}], "key 'mapping[0].rename.to' is required"),
        ([{"rename": "a", "to": "b", "remove": "c"}], "exactly one of the keys rename, remove, cast"),
        ([{"drop": "a"}], "key 'mapping[0]'"),
        (
            [{"remove": "a"}, {"cast": "a", "type": "integr"}],
            "mapping[1].cast.type': got 'integr'; unknown type",
        ),
        ([{"cast": "a", "type": "array<int>"}], "complex types: use transform.sql"),
        ([{"rename": "a", "to": "x.y"}], "'x.y' is not a top-level column name"),
        ([{"remove": "a..b"}], "'a..b' is not a field"),
        ([{"from_path": "regex", "regex": "(", "group": "g", "to": "x"}], "regex '(' does not compile"),
        (
            [{"from_path": "regex", "regex": "(?P<h>..)", "group": "hour", "to": "x"}],
            "has no group named 'hour' (its named groups: h)",
        ),
        ([{"from_path": "regex", "to": "x"}], 'from_path "regex" needs "regex"'),
        ([{"from_path": "rel", "to": "x", "group": "g"}], "only apply to from_path 'regex'"),
        ([{"from_path": "hour", "to": "x"}], "mapping[0].from_path.from_path"),
        ([{"constant": "x", "value": None}], 'a null value needs a "type"'),
        ([{"constant": "n", "value": "abc", "type": "int"}], "constant 'n': value 'abc' is not a int"),
        ([{"default": "n", "value": "abc", "type": "int"}], "default 'n': value 'abc' is not a int"),
        ([{"default": "d", "value": "2024-02-30", "type": "date"}], "is not a date"),
        ([{"constant": "m", "value": "1,5", "type": "decimal(10,2)"}], "no thousands separator"),
        ([{"constant": "m", "value": "123456789", "type": "decimal(10,2)"}], "more than 8 digits"),
        ([{"constant": "b", "value": "maybe", "type": "boolean"}], "write true or false"),
        ([{"constant": "s", "value": "300", "type": "tinyint"}], "out of the range of tinyint"),
        ([{"constant": "t", "value": "2024-05-01 25:00", "type": "timestamp"}], "is not a timestamp"),
        (
            [{"rename": "a", "to": "x"}, {"constant": "X", "value": 1}],
            "mapping[1] (constant 'X') writes column 'X', which mapping[0] (rename 'a') already writes",
        ),
    ],
)
def test_a_bad_entry_is_named_by_its_index_with_the_fix(entries: list[object], message: str) -> None:
    found = problem(entries)
    assert found.startswith("gs://b/ds/t/_config/load.json: ")
    assert message in found


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("5", "int"),
        (" 1.5 ", "int"),  # Spark drops the fraction
        (7, "bigint"),
        (True, "int"),
        ("1e3", "double"),
        ("NaN", "double"),
        ("12.50", "decimal(10,2)"),
        ("yes", "boolean"),
        ("2024-5-1", "date"),
        ("2024-05-01T13:00:00Z", "timestamp"),
        ("2024-05-01 13", "timestamp"),
        ("anything", "string"),
    ],
)
def test_a_typed_value_spark_converts_is_taken(value: object, kind: str) -> None:
    load = LoadConfig.model_validate({"mapping": [{"constant": "c", "value": value, "type": kind}]})
    assert len(load.mapping) == 1


def test_a_default_after_a_column_is_made_fills_it_and_is_no_duplicate() -> None:
    load = LoadConfig.model_validate({"mapping": [{"rename": "a", "to": "x"}, {"default": "x", "value": 0}]})
    assert len(load.mapping) == 2


@pytest.mark.parametrize("name", ["int", "BIGINT", "decimal(10,2)", "decimal", "varchar(5)", "timestamp_ntz"])
def test_spark_type_names_are_known(name: str) -> None:
    assert known_type(name)


@pytest.mark.parametrize("name", ["integr", "decimal(10,", "struct<a:int>", "map<string,int>", ""])
def test_other_type_names_are_not(name: str) -> None:
    assert not known_type(name)


FIELDS = {"id": None, "Payload": {"user": {"id": None}, "kind": None}, "debug": None}


def test_lookup_follows_dotted_paths_case_insensitively() -> None:
    assert lookup(FIELDS, "payload.USER.id") == ("Payload", "user", "id")
    assert lookup(FIELDS, "payload.user.name") is None
    assert lookup(FIELDS, "id.x") is None  # id is no struct


def test_removing_the_last_field_of_a_struct_removes_the_struct() -> None:
    assert removal(FIELDS, ("Payload", "user", "id")) == ("Payload", "user")
    assert removal(FIELDS, ("Payload", "kind")) == ("Payload", "kind")
    assert removal({"p": {"q": {"r": None}}}, ("p", "q", "r")) == ("p",)


def test_playing_a_mapping_gives_the_fields_it_leaves_in_order() -> None:
    entries = LoadConfig.model_validate({"mapping": EVERY_KIND[:5]}).mapping
    after, problems = play({**FIELDS, "amount": None}, entries)
    assert problems == []
    assert after == {
        "id": None,
        "Payload": {"kind": None},
        "amount": None,
        "user_id": None,
        "source": None,
        "country": None,
    }


def test_each_entry_sees_what_the_entries_before_it_left() -> None:
    entries = LoadConfig.model_validate(
        {
            "mapping": [
                {"rename": "debug", "to": "trace"},
                {"cast": "debug", "type": "int"},  # gone: renamed above
                {"cast": "trace", "type": "int"},
                {"remove": "payload.user.name"},
            ]
        }
    ).mapping
    assert check(FIELDS, entries) == [
        "mapping[1] (cast 'debug'): the batch has no field 'debug' (it has: id, Payload, trace); "
        "fix the entry or an entry before it, or the data",
        "mapping[3] (remove 'payload.user.name'): field 'Payload.user' has no field 'name' (it has: id); "
        "fix the entry or an entry before it, or the data",
    ]


def test_the_time_the_path_names_goes_into_a_column() -> None:
    hour = datetime(2026, 11, 23, 14, tzinfo=UTC)
    assert path_value(0, FromPath(from_path="time", to="h"), "2026/11/23/14", hour) == hour


def test_a_path_with_no_time_is_an_error_that_points_to_the_regex_kind() -> None:
    with pytest.raises(
        ValueError, match=r"mapping\[3\] \(from_path 'time'\): the batch's path 'b1' names no time"
    ):
        path_value(3, FromPath(from_path="time", to="h"), "b1", None)


def test_rel_and_regex_groups_of_the_path() -> None:
    assert path_value(0, FromPath(from_path="rel", to="r"), "eu/2026/b1", None) == "eu/2026/b1"
    region = FromPath(from_path="regex", regex=r"^(?P<region>[a-z]+)/", group="region", to="region")
    assert path_value(0, region, "eu/2026/b1", None) == "eu"
    with pytest.raises(ValueError, match=r"finds no group 'region' in the batch's path '2026/b1'"):
        path_value(0, region, "2026/b1", None)


def test_spark_ddl_is_read_into_fields() -> None:
    ddl = (
        "id INT, `odd name` STRING, "
        "payload STRUCT<user: STRUCT<id: BIGINT, tags: ARRAY<STRING>>, amount: DECIMAL(10,2)> NOT NULL"
    )
    assert ddl_fields(ddl) == {
        "id": None,
        "odd name": None,
        "payload": {"user": {"id": None, "tags": None}, "amount": None},
    }


def test_a_json_sample_is_read_into_fields() -> None:
    assert sample_fields({"id": 1, "p": {"u": {"id": 2}, "l": [1]}}) == {
        "id": None,
        "p": {"u": {"id": None}, "l": None},
    }


def test_field_and_cast_sql_quote_every_name() -> None:
    assert field_sql(("payload", "odd`name")) == "`payload`.`odd``name`"
    assert try_cast_sql(("amount",), "decimal(10,2)") == "try_cast(`amount` AS decimal(10,2))"


@pytest.mark.parametrize(
    ("regex", "name", "expected"),
    [
        (None, "ds/tbl/2024/05/01/13/_SUCCESS", datetime(2024, 5, 1, 13, tzinfo=UTC)),
        (None, "ds/tbl/b1/_SUCCESS", None),
        # A custom layout's yyyy/mm/dd groups: the job could not tell them from the rel alone.
        (
            r"^(?P<dataset>[^/]+)/(?P<table>[^/]+)/d=(?P<yyyy>\d{4})-(?P<mm>\d\d)-(?P<dd>\d\d)/$",
            "ds/tbl/d=2024-05-02/_SUCCESS",
            datetime(2024, 5, 2, tzinfo=UTC),
        ),
    ],
)
def test_the_manifest_carries_the_time_the_path_names_as_the_protocol_parsed_it(
    regex: str | None, name: str, expected: datetime | None
) -> None:
    store = MemoryStore("bkt")
    store.write(name.replace("_SUCCESS", "part-0.csv"), b"id\n1\n")
    clock = SystemClock()
    settings = Settings.from_env({"DESTINATION_REGEX": regex} if regex else {})
    inv = Invocation(store, InlineRunner(store, MemoryTables()), settings, clock, "i", clock.now())
    batch = parse_success(store.bucket, name, settings.destination_regex)
    resolved = ConfigReader(store).resolve(batch.folder)
    made = manifest_batch(inv, batch, resolved, 7)
    assert made.natural_time == expected
    assert ManifestBatch.model_validate_json(made.model_dump_json()).natural_time == expected


def test_a_path_through_a_field_that_is_no_struct_says_so() -> None:
    entries = LoadConfig.model_validate({"mapping": [{"remove": "id.x"}]}).mapping
    assert check(FIELDS, entries) == [
        "mapping[0] (remove 'id.x'): field 'id' is no struct, so it has no field 'x'; "
        "fix the entry or the data"
    ]
