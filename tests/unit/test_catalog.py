"""`turnstile.jobs.catalog`: one builder of the Iceberg catalog properties, for Dataproc and local Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.jobs.catalog import ICEBERG_EXTENSIONS, iceberg_catalog_properties
from turnstile.jobs.dataproc import catalog_properties
from turnstile.jobs.local_spark import spark_conf

CATALOG = "spark.sql.catalog.lake"


def test_hadoop_catalog() -> None:
    assert iceberg_catalog_properties("lake", "hadoop", warehouse="gs://w/iceberg") == {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        CATALOG: "org.apache.iceberg.spark.SparkCatalog",
        f"{CATALOG}.type": "hadoop",
        f"{CATALOG}.warehouse": "gs://w/iceberg",
    }


def test_rest_catalog_takes_its_warehouse_only_when_given() -> None:
    bare = iceberg_catalog_properties("lake", "rest", warehouse=None, uri="https://rest.example/v1")
    assert (bare[f"{CATALOG}.type"], bare[f"{CATALOG}.uri"]) == ("rest", "https://rest.example/v1")
    assert f"{CATALOG}.warehouse" not in bare
    full = iceberg_catalog_properties("lake", "rest", warehouse="gs://w", uri="https://rest.example/v1")
    assert full[f"{CATALOG}.warehouse"] == "gs://w"


def test_biglake_catalog_uses_the_catalog_name_as_its_id() -> None:
    props = iceberg_catalog_properties(
        "lake", "biglake", warehouse="gs://w", gcp_project="p", location="europe-west1"
    )
    assert {k: v for k, v in props.items() if k.startswith(f"{CATALOG}.")} == {
        f"{CATALOG}.catalog-impl": "org.apache.iceberg.gcp.biglake.BigLakeCatalog",
        f"{CATALOG}.gcp_project": "p",
        f"{CATALOG}.gcp_location": "europe-west1",
        f"{CATALOG}.blms_catalog": "lake",
        f"{CATALOG}.warehouse": "gs://w",
    }


@pytest.mark.parametrize(
    ("kind", "given", "missing"),
    [
        ("rest", {"warehouse": "gs://w"}, "ICEBERG_CATALOG_URI"),
        ("hadoop", {"warehouse": None}, "ICEBERG_WAREHOUSE"),
        ("biglake", {"warehouse": None, "gcp_project": "p", "location": "l"}, "ICEBERG_WAREHOUSE"),
        ("biglake", {"warehouse": "gs://w", "location": "l"}, "GOOGLE_CLOUD_PROJECT"),
        ("biglake", {"warehouse": "gs://w", "gcp_project": "p"}, "DATAPROC_REGION"),
    ],
)
def test_a_missing_setting_is_named(kind: str, given: dict[str, str | None], missing: str) -> None:
    with pytest.raises(SettingsError, match=rf"^{missing} is not set; ICEBERG_CATALOG_TYPE={kind} needs"):
        iceberg_catalog_properties("lake", kind, **given)  # type: ignore[arg-type]


def test_local_spark_and_dataproc_build_the_catalog_with_the_same_function(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    local = spark_conf([], warehouse, "lake")
    expected = iceberg_catalog_properties("lake", "hadoop", warehouse=warehouse.resolve().as_uri())
    assert {k: local[k] for k in expected} == expected
    settings = Settings.from_env(
        {"ICEBERG_CATALOG": "lake", "ICEBERG_CATALOG_TYPE": "hadoop", "ICEBERG_WAREHOUSE": "gs://w/i"}
    )
    cloud = catalog_properties(settings)
    expected = iceberg_catalog_properties("lake", "hadoop", warehouse="gs://w/i")
    assert {k: cloud[k] for k in expected} == expected
    assert cloud["spark.dataproc.driverEnv.ICEBERG_CATALOG"] == "lake"
