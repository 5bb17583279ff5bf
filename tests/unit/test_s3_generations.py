"""The S3 store's generation of a version, from a key's versions newest first (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from turnstile.store.s3_generations import (
    PER_SECOND,
    of_version,
    unversioned_generation,
    version_generation,
)

T0 = datetime(2026, 5, 1, 13, 0, 0, tzinfo=UTC)


def versions(*found: tuple[str, str, float]) -> list[dict[str, Any]]:
    """ListObjectVersions entries (key, version id, seconds after T0), newest first."""
    return [
        {"Key": k, "VersionId": v, "LastModified": T0 + timedelta(seconds=s), "ETag": '"d41d8cd98f"'}
        for k, v, s in found
    ]


def test_a_version_counts_the_older_versions_of_its_key_within_its_second() -> None:
    listed = versions(
        ("a/_SUCCESS", "v4", 2), ("a/_SUCCESS", "v3", 1), ("a/_SUCCESS", "v2", 1), ("a/_SUCCESS", "v1", 0)
    )
    assert of_version("a/_SUCCESS", "v4", listed) == version_generation(T0 + timedelta(seconds=2), 0)
    assert (
        of_version("a/_SUCCESS", "v3", listed)
        == int((T0 + timedelta(seconds=1)).timestamp()) * PER_SECOND + 1
    )
    assert of_version("a/_SUCCESS", "v2", listed) == int((T0 + timedelta(seconds=1)).timestamp()) * PER_SECOND
    # Successive uploads grow, within a second and across seconds.
    generations = [of_version("a/_SUCCESS", v, listed) for v in ("v1", "v2", "v3", "v4")]
    assert generations == sorted(generations) and len(set(generations)) == 4


def test_other_keys_with_the_prefix_and_a_version_gone_for_good() -> None:
    listed = versions(("a/_SUCCESS", "v2", 0), ("a/_SUCCESS", "v1", 0), ("a/_SUCCESS.bak", "x", 0))
    assert of_version("a/_SUCCESS", "v1", listed) == version_generation(T0, 0)  # not counting `.bak`
    assert of_version("a/_SUCCESS", "v0", listed) is None


def test_the_listing_is_read_no_further_than_an_earlier_second() -> None:
    def pages() -> Any:
        yield from versions(("a/_SUCCESS", "v2", 5), ("a/_SUCCESS", "v1", 4))
        raise AssertionError("read past the first version of an earlier second")

    assert of_version("a/_SUCCESS", "v2", pages()) == version_generation(T0 + timedelta(seconds=5), 0)


def test_the_null_version_keeps_its_generation_and_later_ones_in_its_second_read_above_it() -> None:
    # "null": stored before versioning was turned on, when its generation came from its ETag.
    listed = versions(("a/_SUCCESS", "v2", 0), ("a/_SUCCESS", "v1", 0), ("a/_SUCCESS", "null", 0))
    null = unversioned_generation(T0, '"d41d8cd98f"')
    assert of_version("a/_SUCCESS", "null", listed) == null
    generations = [of_version("a/_SUCCESS", v, listed) for v in ("null", "v1", "v2")]
    assert generations == sorted(generations) and len(set(generations)) == 3
    assert of_version("a/_SUCCESS", "v1", listed) == max(version_generation(T0, 1), null + 1)
