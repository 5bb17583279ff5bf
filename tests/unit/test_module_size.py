"""A module a newcomer reads in one sitting: none in the library is over 400 lines."""

from __future__ import annotations

from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "shared" / "turnstile"
LIMIT = 400


def test_no_library_module_is_over_the_limit() -> None:
    sizes = {str(p.relative_to(LIBRARY)): len(p.read_text().splitlines()) for p in LIBRARY.rglob("*.py")}
    assert len(sizes) > 50
    assert {name: lines for name, lines in sizes.items() if lines > LIMIT} == {}
