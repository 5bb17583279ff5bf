"""Which modules a source file reaches through its imports, read from the source (nothing is run).

`reached` gives the package's own module files an entry point needs (what `packaging` zips);
`third_party` the top-level names of the other distributions' modules they import (what the
requirements must provide). Every import statement counts, also one inside a function; a module
named only in a string (`python -m turnstile.x`) is not followed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path


def _package_of(path: Path, root: Path) -> str:
    """The dotted package a file under `root` belongs to (`root/a/b/c.py` -> `a.b`)."""
    return ".".join(path.relative_to(root).parent.parts)


def imported_names(path: Path, root: Path) -> set[str]:
    """Absolute dotted names `path` imports: for `from a.b import c`, both `a.b` and `a.b.c`
    (c may be a module or a name in a.b); relative imports resolved against `root`, and left out in a
    file outside it."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and root not in path.parents:
                continue  # a relative import outside `root` stays in its own package
            if node.level:  # `from . import x` in a/b/c.py is a.b; each further dot goes one up
                package = _package_of(path, root).split(".")
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def module_file(name: str, root: Path) -> Path | None:
    """The source file of module or package `name` under `root`, or None when it is not there."""
    base = root.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _with_parent_packages(path: Path, root: Path) -> list[Path]:
    """`path` and the `__init__.py` of each package above it (importing a module runs them)."""
    found = [path]
    folder = path.parent
    while folder != root and root in folder.parents:
        init = folder / "__init__.py"
        if init.is_file() and init != path:
            found.append(init)
        folder = folder.parent
    return found


def reached(starts: Iterable[Path], root: Path, package: str) -> set[Path]:
    """The files of `package` (a folder under `root`) that `starts` import, directly or through
    each other, with the `__init__.py` of every package on the way."""
    seen: set[Path] = set()
    todo = [found for start in starts for found in _with_parent_packages(start, root)]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported_names(path, root):
            if name.split(".")[0] != package:
                continue
            target = module_file(name, root)
            if target is not None:
                todo.extend(_with_parent_packages(target, root))
    return {path for path in seen if root / package in path.parents}


def third_party(files: Iterable[Path], root: Path, own: Iterable[str]) -> set[str]:
    """Top-level module names `files` import that are neither standard library nor in `own`."""
    skipped = set(own) | set(sys.stdlib_module_names) | {"__future__"}
    return {
        name.split(".")[0]
        for path in files
        for name in imported_names(path, root)
        if name and name.split(".")[0] not in skipped
    }
