"""The reference docs cannot drift from the code: every setting and load.json key is documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstile.load_config import LoadConfig
from turnstile.settings import Settings

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
