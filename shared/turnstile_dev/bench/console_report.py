"""The console bench's report (`console.run`'s figures) as Markdown, with the figures before a change
beside it when given (a JSON of the same shape as one store's: pages, first load, reading)."""

from __future__ import annotations

import json
from typing import Any


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown(result: dict[str, Any], before: str | None = None) -> str:
    stores = result["stores"]
    names = list(stores)
    earlier = json.loads(before) if before else None
    head = ["page", *(f"{n} median s | {n} slowest s" for n in names)]
    if earlier:
        head.append(f"before ({earlier['store']}) median s | slowest s")
    rows = [f"| {' | '.join(head)} |", f"|{' --- |' * (len(names) * 2 + 1 + (2 if earlier else 0))}"]
    start = "first load of the tables page, from the console's start"
    firsts = (
        (f"{start}: its first answer", "first_load_seconds"),
        (f"{start}: every table shown", "first_complete_seconds"),
    )
    for title, key in firsts:
        first = [title, *(_first(stores[n], key) for n in names)]
        if earlier:
            first.append(_first(earlier, key))
        rows.append(f"| {' | '.join(first)} |")
    for page in stores[names[0]]["pages"]:
        cells = [page]
        for n in names:
            t = stores[n]["pages"][page]
            cells.append(f"{t['median_seconds']:.3f} | {t['max_seconds']:.3f}")
        if earlier:
            t = earlier["pages"].get(page, {})
            cells.append(f"{_seconds(t.get('median_seconds'))} | {_seconds(t.get('max_seconds'))}")
        rows.append(f"| {' | '.join(cells)} |")
    reading = "\n".join(
        f"| {n} | {stores[n]['objects']:,} | {stores[n]['reading']['seconds']:.3f} | "
        f"{_seconds(stores[n]['reading'].get('serial_seconds'))} | "
        f"{sum(stores[n]['reading']['requests'].values()):,} "
        f"({', '.join(f'{op} {c}' for op, c in stores[n]['reading']['requests'].items())}) | "
        f"{stores[n]['reading']['requests_per_table']} |"
        for n in names
    )
    if earlier and "reading" in earlier:
        r = earlier["reading"]
        objects = earlier.get("objects", 0)
        reading += (
            f"\n| before ({earlier['store']}) | {objects:,} | {r['seconds']:.3f} | "
            f"{_seconds(r.get('serial_seconds'))} | {r['requests']} | "
            f"{r['requests_per_table']} |"
        )
    met = "under" if result["met"] else "NOT under"
    text = f"""Page loads of the operator console (`turnstile ui`) on a bucket of {result["tables"]} tables
and {result["batches"]:,} batches, rendered through the console's application (TestClient), on an
in-memory store and on fake-gcs-server as the local stack runs it (filesystem backend, the real
google-cloud-storage client). In memory each table is read through a listing of its own state
objects, as on GCS; on the emulator, which walks the whole bucket for any listing, one listing of
the bucket serves every table, as `turnstile ui` reads it there. The first load of the tables
page is timed from the console's start: its first answer (a page waits {_patience(stores)} for the
console's first reading of every table, then says how far it has got{_said(stores)} and fetches its
rows again until it is done) and the time until it shows every table; then each page is loaded
{result["repeats"]} times: median and slowest. The tables page and the lineage graph are served from
the console's last reading (renewed in the background, never older than its bound); a table's page
is read afresh at each load. The slowest page's median (first loads apart) is {met} the
{result["target_seconds"]:g} s target.

{chr(10).join(rows)}

One reading of every table, as the console makes it in the background (the tables page's data):
its seconds, {_workers(stores)} tables read at once as the console reads them and one at a time,
and its storage requests at the store port by operation (a listing counts once whatever pages it
takes):

| store | objects | seconds | seconds, one table at a time | requests | per table |
| --- | --- | --- | --- | --- | --- |
{reading}
"""
    if earlier:
        text += f"\nBefore: {earlier['what']}\n"
    profile = result.get("tables_page_profile") or []
    if profile:
        lines = "\n".join(
            f"| `{p['function']}` | {p['calls']} | {p['cumulative_seconds']:.3f} | {p['share'] * 100:.0f}% |"
            for p in profile
        )
        text += f"""
Where one reading goes on the in-memory store (under the profiler, which slows it down), the
turnstile functions that take the longest with what they call:

| function | calls | seconds | share |
| --- | --- | --- | --- |
{lines}
"""
    return text


def _first(store: dict[str, Any], key: str) -> str:
    """A first load's figure; a store measured before the reading state waited for the reading:
    its first answer showed every table."""
    value = store.get(key, store.get("first_load_seconds"))
    return f"{_seconds(value)} | -"


def _patience(stores: dict[str, Any]) -> str:
    values = {s.get("patience_seconds") for s in stores.values()} - {None}
    return f"{values.pop():g} s" if len(values) == 1 else "a moment"


def _workers(stores: dict[str, Any]) -> str:
    values = {s["reading"].get("workers") for s in stores.values()} - {None}
    return str(values.pop()) if len(values) == 1 else "several"


def _said(stores: dict[str, Any]) -> str:
    said = [f'{name}: "{s["first_answer_said"]}"' for name, s in stores.items() if s.get("first_answer_said")]
    return f" (its first answer said it, {'; '.join(said)})" if said else ""
