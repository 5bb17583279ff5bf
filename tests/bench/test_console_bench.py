"""The console's page-load benchmark on a tiny bucket: every page renders, the figures are there,
and the profile says where the tables page's time goes."""

from __future__ import annotations

from turnstile_dev.bench import console


def test_the_console_bench_runs_on_a_tiny_bucket() -> None:
    result = console.run(tables=26, batches=260, repeats=1)
    assert (result["tables"], result["batches"]) == (26, 260)
    assert set(result["pages"]) == {
        "tables",
        "tables, refresh",
        "table (blocked)",
        "table (derived)",
        "lineage",
    }
    for figures in result["pages"].values():
        assert 0 < figures["median_seconds"] <= figures["max_seconds"]
    assert result["slowest_median_seconds"] == max(p["median_seconds"] for p in result["pages"].values())
    profile = result["tables_page_profile"]
    assert profile[0]["function"].startswith("ui/pages.py") and profile[0]["share"] == 1.0
    assert any(p["function"].startswith("ops/status.py") for p in profile)
    text = console.markdown(result)
    assert "| tables |" in text and "26 tables and 260 batches" in " ".join(text.split())
