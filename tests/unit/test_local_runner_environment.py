"""What a local job is given on top of the environment it inherits: the submitter's storage,
project and Iceberg catalog, from settings (not from this process's environment)."""

from __future__ import annotations

from turnstile.config.settings import Settings
from turnstile.jobs.local import job_environment


def test_the_job_gets_the_storage_project_and_catalog_of_the_settings() -> None:
    settings = Settings.from_env(
        {
            "STORAGE_EMULATOR_HOST": "http://127.0.0.1:4443",
            "GOOGLE_CLOUD_PROJECT": "local",
            "ICEBERG_CATALOG": "lake",
            "ICEBERG_WAREHOUSE": "/tmp/warehouse",
            "JOB_PREFIX": "other",
        }
    )
    assert job_environment(settings) == {
        "STORAGE_EMULATOR_HOST": "http://127.0.0.1:4443",
        "GOOGLE_CLOUD_PROJECT": "local",
        "ICEBERG_CATALOG": "lake",
        "ICEBERG_WAREHOUSE": "/tmp/warehouse",
    }


def test_unset_settings_are_left_to_the_inherited_environment() -> None:
    assert job_environment(Settings.from_env({})) == {"ICEBERG_CATALOG": "turnstile"}
