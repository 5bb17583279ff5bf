"""Turn pydantic's validation errors into one line per problem that names key, value and rule."""

from __future__ import annotations

from pydantic import ValidationError


def explain(error: ValidationError) -> list[str]:
    """One sentence per failed field: `key 'mode': got 'upsert'; Input should be 'append' or ...`."""
    lines = []
    for problem in error.errors(include_url=False):
        key = ".".join(str(part) for part in problem["loc"])
        if not key:
            lines.append(problem["msg"].removeprefix("Value error, "))
        elif problem["type"] == "extra_forbidden":
            lines.append(f"key '{key}' is not a known key (got {problem['input']!r})")
        elif problem["type"] == "missing":
            lines.append(f"key '{key}' is required")
        else:
            lines.append(f"key '{key}': got {problem['input']!r}; {problem['msg']}")
    return lines
