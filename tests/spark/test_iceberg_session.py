"""A local Spark session reads and writes Iceberg tables with the jars `turnstile.jobs.local_spark` builds."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from turnstile.core.errors import SettingsError
from turnstile.jobs import local_spark as jars
from turnstile.jobs.local_spark import check_java, ensure_jars, java_version, parse_java_version

TABLE = "local.db.t"


@pytest.mark.spark
def test_create_insert_merge_and_snapshot_properties(spark: Any, warehouse: Path) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
    spark.sql(f"CREATE TABLE {TABLE} (id INT, v STRING) USING iceberg")

    first = spark.createDataFrame([(1, "one"), (2, "two")], "id INT, v STRING")
    first.writeTo(TABLE).option("snapshot-property.turnstile.rel", "a/b").append()

    spark.createDataFrame([(2, "TWO"), (3, "three")], "id INT, v STRING").createOrReplaceTempView("updates")
    spark.sql(
        f"""
        MERGE INTO {TABLE} t USING updates u ON t.id = u.id
        WHEN MATCHED THEN UPDATE SET t.v = u.v
        WHEN NOT MATCHED THEN INSERT *
        """
    )

    rows = sorted((r.id, r.v) for r in spark.table(TABLE).collect())
    assert rows == [(1, "one"), (2, "TWO"), (3, "three")]

    snapshots = spark.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {TABLE}.snapshots ORDER BY committed_at"
    ).collect()
    assert [s.operation for s in snapshots] == ["append", "overwrite"]
    append, merge = snapshots
    assert append.summary["turnstile.rel"] == "a/b"
    assert append.summary["added-records"] == "2"
    assert "turnstile.rel" not in merge.summary
    assert merge.parent_id == append.snapshot_id

    # The Hadoop catalog keeps everything under the warehouse folder, nowhere else.
    assert list((warehouse / "db" / "t" / "metadata").glob("v*.metadata.json"))
    assert list((warehouse / "db" / "t" / "data").glob("*.parquet"))


@pytest.mark.spark
def test_ensure_jars_second_call_reuses_the_built_jar(iceberg_jars: list[Path]) -> None:
    runtime, relocated = iceberg_jars
    assert runtime.name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    before = relocated.stat().st_mtime_ns

    assert ensure_jars(relocated.parent) == iceberg_jars
    assert relocated.stat().st_mtime_ns == before
    assert [p.name for p in relocated.parent.iterdir()] == [relocated.name]  # no temp leftovers


@pytest.mark.spark
def test_ensure_jars_rebuilds_a_jar_older_than_its_inputs(iceberg_jars: list[Path], tmp_path: Path) -> None:
    stale = tmp_path / iceberg_jars[1].name
    shutil.copy(iceberg_jars[1], stale)
    os.utime(stale, (0, 0))

    assert ensure_jars(tmp_path)[1] == stale
    assert stale.stat().st_mtime > 0


def test_ensure_jars_without_jarjar_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"apt-get install libjarjar-java"):
        ensure_jars(tmp_path / "jars", jarjar=tmp_path / "missing-jarjar.jar")


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
    ],
)
def test_parse_java_version(output: str, major: int) -> None:
    assert parse_java_version(output) == major


def test_check_java_rejects_old_java() -> None:
    with pytest.raises(SettingsError) as caught:
        check_java(lambda: 11)
    assert str(caught.value) == (
        "Java 11 found, Spark with Iceberg needs 17 or newer; "
        "install OpenJDK 17: apt-get install openjdk-17-jre-headless"
    )
    assert check_java(lambda: 17) == 17


def test_java_version_reads_java_dash_version(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        assert cmd[1:] == ["-version"]
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr='java version "1.8.0_392"\n')

    monkeypatch.setattr(jars.shutil, "which", lambda _: "/usr/bin/java")
    monkeypatch.setattr(jars.subprocess, "run", fake_run)
    assert java_version() == 8
    with pytest.raises(SettingsError, match=r"Java 8 found.*apt-get install openjdk-17-jre-headless"):
        check_java()


def test_missing_java_says_how_to_install_it() -> None:
    with pytest.raises(SettingsError, match=r"not found on PATH; install OpenJDK 17"):
        java_version("no-such-java-binary")


def test_main_exits_2_with_one_line_on_settings_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(jars, "check_java", lambda: check_java(lambda: 11))
    assert jars.main([]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert "apt-get install openjdk-17-jre-headless" in err
