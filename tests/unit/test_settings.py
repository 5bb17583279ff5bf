"""Settings from the environment (turnstile.settings): parsing, errors, documentation."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from turnstile.errors import SettingsError, Terminal
from turnstile.paths import DEFAULT_DESTINATION_REGEX, parse_success
from turnstile.settings import Settings

RAW_REGEX = r"^raw/(?P<dataset>[^/]+)/(?P<table>[^/]+)/(?P<batch>[^/]+)/$"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The process environment without any variable turnstile reads."""
    for variable in Settings.variables():
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_defaults() -> None:
    s = Settings.from_env({})
    assert s.success_filename == "_SUCCESS"
    assert s.destination_regex is None
    assert s.order_per_table is False
    assert s.start_backfill_filename is None
    assert s.wait_for_validation is False
    assert s.function_timeout_sec == 540
    assert s.restart_buffer_seconds == 30
    assert s.job_prefix == "turnstile"
    assert s.job_runner == "local"
    assert s.gcp_project is None
    assert s.storage_emulator_host is None
    assert s.log_level == "INFO"
    assert s.stale_claim_seconds == 3600
    assert s.dataproc_region == "us-central1"
    assert s.dataproc_runtime_version == "2.2"
    assert s.dataproc_properties == {}
    assert s.dataproc_labels == {}
    assert s.job_python_file_uris == ()
    assert s.job_jar_uris == ()
    assert s.iceberg_catalog == "turnstile"
    assert s.iceberg_catalog_type == "hadoop"
    assert s.turnstile_home == ".turnstile"
    assert s == Settings()


@pytest.mark.parametrize("variable", ["ORDER_PER_TABLE", "WAIT_FOR_VALIDATION"])
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("off", False),
    ],
)
def test_booleans(variable: str, text: str, value: bool) -> None:
    s = Settings.from_env({variable: text})
    field = {"ORDER_PER_TABLE": "order_per_table", "WAIT_FOR_VALIDATION": "wait_for_validation"}[variable]
    assert getattr(s, field) is value


@pytest.mark.parametrize(
    ("environ", "field", "value"),
    [
        ({"FUNCTION_TIMEOUT_SEC": "300"}, "function_timeout_sec", 300),
        ({"FUNCTION_TIMEOUT_SEC": "3600"}, "function_timeout_sec", 3600),
        ({"RESTART_BUFFER_SECONDS": "0"}, "restart_buffer_seconds", 0),
        ({"STALE_CLAIM_SECONDS": "60"}, "stale_claim_seconds", 60),
        ({"SUCCESS_FILENAME": "DONE"}, "success_filename", "DONE"),
        ({"START_BACKFILL_FILENAME": "_HISTORYDONE"}, "start_backfill_filename", "_HISTORYDONE"),
        ({"JOB_PREFIX": "ts-prod-2"}, "job_prefix", "ts-prod-2"),
        ({"JOB_RUNNER": "dataproc"}, "job_runner", "dataproc"),
        ({"LOG_LEVEL": "DEBUG"}, "log_level", "DEBUG"),
        ({"ICEBERG_CATALOG_TYPE": "rest"}, "iceberg_catalog_type", "rest"),
        ({"GOOGLE_CLOUD_PROJECT": "my-proj"}, "gcp_project", "my-proj"),
        (
            {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:4443"},
            "storage_emulator_host",
            "http://127.0.0.1:4443",
        ),
        (
            {"DATAPROC_PROPERTIES": '{"spark.executor.instances": "2", "spark.driver.memory": "4g"}'},
            "dataproc_properties",
            {"spark.executor.instances": "2", "spark.driver.memory": "4g"},
        ),
        ({"DATAPROC_LABELS": '{"team": "data"}'}, "dataproc_labels", {"team": "data"}),
        ({"DATAPROC_LABELS": ""}, "dataproc_labels", {}),
        ({"DATAPROC_LABELS": "   "}, "dataproc_labels", {}),
        ({"JOB_JAR_URIS": "gs://a/x.jar"}, "job_jar_uris", ("gs://a/x.jar",)),
        (
            {"JOB_JAR_URIS": " gs://a/x.jar , gs://b/y.jar ,, "},
            "job_jar_uris",
            ("gs://a/x.jar", "gs://b/y.jar"),
        ),
        ({"JOB_PYTHON_FILE_URIS": ""}, "job_python_file_uris", ()),
        ({"DESTINATION_REGEX": RAW_REGEX}, "destination_regex", RAW_REGEX),
        ({"DESTINATION_REGEX": DEFAULT_DESTINATION_REGEX}, "destination_regex", DEFAULT_DESTINATION_REGEX),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None,
)
def test_values_are_parsed(environ: dict[str, str], field: str, value: object) -> None:
    assert getattr(Settings.from_env(environ), field) == value


BAD = [
    ("ORDER_PER_TABLE", "maybe", "valid boolean"),
    ("WAIT_FOR_VALIDATION", "2", "valid boolean"),
    ("FUNCTION_TIMEOUT_SEC", "abc", "valid integer"),
    ("FUNCTION_TIMEOUT_SEC", "9.5", "valid integer"),
    ("FUNCTION_TIMEOUT_SEC", "5", "greater than or equal to 10"),
    ("FUNCTION_TIMEOUT_SEC", "99999", "less than or equal to 3600"),
    ("RESTART_BUFFER_SECONDS", "-1", "greater than or equal to 0"),
    ("STALE_CLAIM_SECONDS", "59", "greater than or equal to 60"),
    ("JOB_PREFIX", "Bad_Prefix", "lowercase letters, digits and hyphens"),
    ("JOB_PREFIX", "a" * 21, "1-20 characters"),
    ("JOB_PREFIX", "9lives", "starting with a letter"),
    ("JOB_RUNNER", "k8s", "'local', 'dataproc' or 'emr'"),
    ("LOG_LEVEL", "verbose", "'DEBUG', 'INFO', 'WARNING' or 'ERROR'"),
    ("ICEBERG_CATALOG_TYPE", "hive", "'biglake'"),
    ("DATAPROC_PROPERTIES", "not json", "Expecting value"),
    ("DATAPROC_PROPERTIES", "[1]", "valid dictionary"),
    # A JSON value is reported by the member at fault, as parsed.
    ("DATAPROC_LABELS", '{"team": 1}', "'DATAPROC_LABELS.team': got 1; Input should be a valid string"),
    ("DESTINATION_REGEX", "(?P<dataset>[^/]+)/", "needs the named groups ['table']"),
    ("DESTINATION_REGEX", "^([^/]+)/([^/]+)/$", "needs the named groups ['dataset', 'table']"),
    ("DESTINATION_REGEX", "(?P<dataset>", "not a valid regular expression"),
]


@pytest.mark.parametrize(("variable", "value", "says"), BAD, ids=[f"{v}={x[:12]}" for v, x, _ in BAD])
def test_each_bad_value_names_the_variable_and_the_value(variable: str, value: str, says: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({variable: value})
    message = str(caught.value)
    assert message.startswith("bad settings: ")
    assert f"environment variable '{variable}" in message
    assert repr(value) in message or value in message or variable == "DATAPROC_LABELS"
    assert says in message
    assert isinstance(caught.value, Terminal)


def test_every_bad_value_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"ORDER_PER_TABLE": "maybe", "JOB_RUNNER": "k8s", "LOG_LEVEL": "loud"})
    message = str(caught.value)
    for fragment in ("'ORDER_PER_TABLE'", "'maybe'", "'JOB_RUNNER'", "'k8s'", "'LOG_LEVEL'", "'loud'"):
        assert fragment in message


def test_restart_buffer_must_fit_inside_the_function_timeout() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"FUNCTION_TIMEOUT_SEC": "60", "RESTART_BUFFER_SECONDS": "60"})
    message = str(caught.value)
    assert "RESTART_BUFFER_SECONDS (60)" in message
    assert "FUNCTION_TIMEOUT_SEC (60)" in message
    ok = Settings.from_env({"FUNCTION_TIMEOUT_SEC": "60", "RESTART_BUFFER_SECONDS": "59"})
    assert (ok.function_timeout_sec, ok.restart_buffer_seconds) == (60, 59)


def test_only_the_documented_names_are_read() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "log_level": "DEBUG",  # a field name is not an environment variable
        "order_per_table": "true",
        "Job_Prefix": "nope",
        "JOB_PREFIX": "ts",
    }
    before = dict(environ)
    s = Settings.from_env(environ)
    assert (s.log_level, s.order_per_table, s.job_prefix) == ("INFO", False, "ts")
    assert environ == before


def test_from_env_reads_the_process_environment_at_call_time(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings.from_env() == Settings()
    clean_env.setenv("ORDER_PER_TABLE", "true")
    clean_env.setenv("JOB_PREFIX", "ts-env")
    clean_env.setenv("JOB_JAR_URIS", "gs://b/iceberg.jar,gs://b/jackson.jar")
    s = Settings.from_env()
    assert s.order_per_table is True
    assert s.job_prefix == "ts-env"
    assert s.job_jar_uris == ("gs://b/iceberg.jar", "gs://b/jackson.jar")
    clean_env.setenv("JOB_PREFIX", "ts-later")
    assert Settings.from_env().job_prefix == "ts-later"  # nothing cached
    assert s.job_prefix == "ts-env"  # a resolved value does not follow the environment


def test_from_env_with_a_bad_process_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LOG_LEVEL", "chatty")
    with pytest.raises(SettingsError, match=r"'LOG_LEVEL': got 'chatty'"):
        Settings.from_env()


def test_settings_are_frozen() -> None:
    s = Settings.from_env({"JOB_PREFIX": "ts"})
    with pytest.raises(ValidationError, match="frozen"):
        s.job_prefix = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        s.order_per_table = True  # type: ignore[misc]
    assert s.job_prefix == "ts"


def test_every_field_has_an_environment_variable_and_a_description() -> None:
    variables = Settings.variables()
    assert len(variables) == len(Settings.model_fields)
    for name, field in Settings.model_fields.items():
        assert field.alias, f"{name} has no environment variable"
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", field.alias), field.alias
        assert field.alias in variables
    for variable, description in variables.items():
        assert description.strip(), f"{variable} has no docstring"
        assert len(description) > 20, f"{variable}: {description!r} says too little"
    assert {"SUCCESS_FILENAME", "DESTINATION_REGEX", "ORDER_PER_TABLE", "START_BACKFILL_FILENAME"} <= set(
        variables
    )
    assert variables["ORDER_PER_TABLE"] != variables["WAIT_FOR_VALIDATION"]


def test_a_custom_destination_regex_is_usable_by_parse_success() -> None:
    s = Settings.from_env({"DESTINATION_REGEX": RAW_REGEX})
    batch = parse_success("bkt", "raw/ds/tbl/b1/_SUCCESS", s.destination_regex)
    assert (batch.table.prefix, batch.table.dataset, batch.table.table, batch.rel) == (
        "raw/ds/tbl",
        "ds",
        "tbl",
        "b1",
    )


def test_an_empty_variable_counts_as_unset() -> None:
    settings = Settings.from_env(
        {"SUCCESS_FILENAME": "", "ORDER_PER_TABLE": "", "START_BACKFILL_FILENAME": ""}
    )
    assert settings.success_filename == "_SUCCESS"
    assert settings.order_per_table is False
    assert settings.start_backfill_filename is None


def test_log_level_is_case_insensitive() -> None:
    assert Settings.from_env({"LOG_LEVEL": "debug"}).log_level == "DEBUG"


def test_problems_name_each_bad_variable_once_and_agree_with_from_env() -> None:
    bad = {"JOB_PREFIX": "Bad_", "LOG_LEVEL": "loud", "STALE_CLAIM_SECONDS": "5", "ORDER_PER_TABLE": ""}
    found = dict(Settings.problems(bad))
    assert set(found) == {"JOB_PREFIX", "LOG_LEVEL", "STALE_CLAIM_SECONDS"}  # "" means unset
    assert found["LOG_LEVEL"].startswith("got 'loud'; ")
    with pytest.raises(SettingsError):
        Settings.from_env(bad)
    assert Settings.problems({"JOB_PREFIX": "ok"}) == []


def test_a_problem_of_two_variables_is_reported_on_the_one_it_names_first() -> None:
    [(variable, message)] = Settings.problems(
        {"RESTART_BUFFER_SECONDS": "600", "FUNCTION_TIMEOUT_SEC": "300"}
    )
    assert variable == "RESTART_BUFFER_SECONDS"
    assert "FUNCTION_TIMEOUT_SEC (300)" in message


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (
            "gs://my-state",
            "must be a bucket's name (lowercase letters, digits, '-', '_', '.'): my-state, not a URI",
        ),
        ("s3://my-state/prefix", ": my-state, not a URI"),
        ("My State", "must be a bucket's name (lowercase letters, digits, '-', '_', '.')"),
    ],
)
def test_state_bucket_must_be_a_bucket_name(value: str, says: str) -> None:
    with pytest.raises(SettingsError, match="'STATE_BUCKET'") as caught:
        Settings.from_env({"STATE_BUCKET": value})
    assert says in str(caught.value)
    assert Settings.from_env({"STATE_BUCKET": "my-state"}).state_bucket == "my-state"
    assert Settings.from_env({"STATE_BUCKET": ""}).state_bucket is None
