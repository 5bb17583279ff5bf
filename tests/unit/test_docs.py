"""The reference docs cannot drift from the code: every setting and load.json key is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from turnstile.config.load_config import LoadConfig
from turnstile.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = (ROOT / "docs" / "CONFIGURATION.md").read_text()


@pytest.mark.parametrize("variable", sorted(Settings.variables()))
def test_every_environment_variable_is_documented(variable: str) -> None:
    assert f"| `{variable}` |" in CONFIGURATION


@pytest.mark.parametrize("key", sorted(str(f.alias or n) for n, f in LoadConfig.model_fields.items()))
def test_every_load_json_key_is_documented(key: str) -> None:
    assert f"| `{key}` |" in CONFIGURATION


def test_readme_shows_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme
    assert "make test" in readme


README = (ROOT / "README.md").read_text()


def test_the_readme_points_to_the_one_reference_of_keys_and_variables() -> None:
    # One reference, not two copies that drift apart.
    assert "(docs/CONFIGURATION.md)" in README
    assert "| `max_batches_per_job` |" not in README


# -- docs/MIGRATING.md -----------------------------------------------------------------------------

MIGRATING = (ROOT / "docs" / "MIGRATING.md").read_text()
# gcs_ocn_bq_ingest's documented environment variables: the table in its gcs_ocn_bq_ingest/README.md,
# WAIT_FOR_VALIDATION from ORDERING.md and MAX_RETRIES_ON_BIGQUERY_ERROR from common/constants.py.
ORIGINAL_VARIABLES = (
    "WAIT_FOR_JOB_SECONDS",
    "SUCCESS_FILENAME",
    "DESTINATION_REGEX",
    "MAX_BATCH_BYTES",
    "JOB_PREFIX",
    "BQ_PROJECT",
    "BQ_STORAGE_PROJECT",
    "FUNCTION_TIMEOUT_SEC",
    "FAIL_ON_ZERO_DML_ROWS_AFFECTED",
    "ORDER_PER_TABLE",
    "START_BACKFILL_FILENAME",
    "RESTART_BUFFER_SECONDS",
    "USE_ERROR_REPORTING_API",
    "WAIT_FOR_VALIDATION",
    "MAX_RETRIES_ON_BIGQUERY_ERROR",
)


def section_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the rows of the first table under `heading` (header and separator left out)."""
    section = text.split(f"\n{heading}\n", 1)[1]
    lines = []
    for line in section.lstrip("\n").splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def names_in(cell: str, pattern: str) -> list[str]:
    return re.findall(rf"`({pattern})`", cell)


def mapped_variables(text: str) -> dict[str, list[str]]:
    """Original variable -> the turnstile variables its row names."""
    rows = section_rows(text, "## Environment variables")
    return {names_in(row[0], "[A-Z_]+")[0]: names_in(row[1], "[A-Z][A-Z0-9_]+") for row in rows}


def unmapped(text: str) -> list[str]:
    """Problems: an original variable without a row, a turnstile variable named that does not exist."""
    mapped = mapped_variables(text)
    problems = [f"no row for {v}" for v in ORIGINAL_VARIABLES if v not in mapped]
    known = Settings.variables()
    for original, ours in sorted(mapped.items()):
        missing = [name for name in ours if name not in known]
        problems += [f"{original} maps to {name}, which turnstile does not have" for name in missing]
    return problems


def test_migrating_maps_every_documented_variable_of_the_original_to_one_that_exists() -> None:
    assert not unmapped(MIGRATING)


def test_a_missing_or_made_up_variable_in_migrating_fails_the_check() -> None:
    without = MIGRATING.replace("| `MAX_BATCH_BYTES` |", "| `MAX_BYTES` |")
    assert "no row for MAX_BATCH_BYTES" in unmapped(without)
    row = "| `ORDER_PER_TABLE` | `ORDER_PER_TABLE` |"
    made_up = MIGRATING.replace(row, "| `ORDER_PER_TABLE` | `ORDERED` |")
    assert unmapped(made_up) == ["ORDER_PER_TABLE maps to ORDERED, which turnstile does not have"]


def test_migrating_maps_load_json_keys_to_keys_or_variables_that_exist() -> None:
    keys = {str(f.alias or n) for n, f in LoadConfig.model_fields.items()}
    rows = section_rows(MIGRATING, "### `load.json` keys")
    assert len(rows) > 10
    for original, ours, _ in rows:
        if ours in ("none", "(default)", "(always)"):
            continue
        first = names_in(ours, "[^`]+")[0].split(":")[0]  # `mode: merge` names the key mode
        exists = first in keys or first in Settings.variables()
        assert exists, f"{original} maps to {first}, which does not exist"


def test_the_readme_links_the_migration_guide() -> None:
    assert "(docs/MIGRATING.md)" in README
