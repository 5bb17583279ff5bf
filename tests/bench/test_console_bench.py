"""The console's page-load benchmark on a tiny bucket, in memory and on fake-gcs-server: every page
renders, the figures are there, the first load apart (its first answer and when every table is
shown), what a reading costs in seconds (the console's workers, and a table at a time) and in
requests, and the profile says where a reading's time goes."""

from __future__ import annotations

import json

from turnstile_dev.bench import console

PAGES = {"tables", "tables, refresh", "table (blocked)", "table (derived)", "lineage"}


def test_the_console_bench_runs_on_a_tiny_bucket() -> None:
    result = console.run(tables=26, batches=260, repeats=1)
    assert (result["tables"], result["batches"]) == (26, 260)
    assert set(result["stores"]) == {"memory", "fake-gcs-server"}
    for store in result["stores"].values():
        assert set(store["pages"]) == PAGES
        for figures in store["pages"].values():
            assert 0 < figures["median_seconds"] <= figures["max_seconds"]
        assert 0 < store["first_load_seconds"] <= store["first_complete_seconds"]
        assert store["reading"]["seconds"] > 0 and store["reading"]["requests"]["read"] > 0
        assert store["reading"]["serial_seconds"] > 0 and store["reading"]["workers"] == 8
    medians = [p["median_seconds"] for s in result["stores"].values() for p in s["pages"].values()]
    assert result["slowest_median_seconds"] == max(medians)
    # On the emulator one listing of the bucket serves every table; in memory, one per table.
    assert result["stores"]["fake-gcs-server"]["reading"]["requests"]["list"] == 1
    assert result["stores"]["memory"]["reading"]["requests"]["list"] >= 26
    profile = result["tables_page_profile"]
    assert profile[0]["function"].startswith("ui/pages.py") and profile[0]["share"] == 1.0
    assert any(p["function"].startswith("ops/status.py") for p in profile)
    before = {
        "store": "fake-gcs-server",
        "what": "the code before",
        "first_load_seconds": 9.5,
        "pages": {"tables": {"median_seconds": 9.5, "max_seconds": 9.9}},
        "reading": {"seconds": 9.5, "requests": "9 (list 9)", "requests_per_table": 3.0},
    }
    text = " ".join(console.markdown(result, json.dumps(before)).split())
    assert "| tables |" in text and "26 tables and 260 batches" in text
    assert "| 9.500 | 9.900 |" in text and "Before: the code before" in text
    assert "its first answer | " in text and "every table shown | " in text
    assert "seconds, one table at a time" in text
