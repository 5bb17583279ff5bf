"""Distributions as the tests reason about them: canonical names, requirements files, what an
installed distribution pulls in, and which imported modules nothing in a set of them provides."""

from __future__ import annotations

import importlib.metadata as md
import re
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(path: Path) -> set[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {canonical(Requirement(line).name) for line in lines if line}


def with_dependencies(names: Iterable[str]) -> set[str]:
    """The distributions and everything they require (as installed here), transitively."""
    closure: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue  # not installed here, so nothing here can import it either
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonical(requirement.name))
    return closure


def unprovided(modules: Iterable[str], distributions: Iterable[str]) -> dict[str, list[str]]:
    """The top-level `modules` that none of `distributions` (or what they require) provides, each
    with the installed distributions that do."""
    available = with_dependencies(distributions)
    providers = md.packages_distributions()
    missing = {}
    for module in modules:
        dists = {canonical(d) for d in providers.get(module, [])}
        if not dists & available:
            missing[module] = sorted(dists)
    return missing
