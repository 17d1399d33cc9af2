"""The table summary is one vocabulary: what the assets write as metadata, the CLI reads back."""

from __future__ import annotations

from resources.api.stats import RequestStats
from resources.warehouse.contract import WriteResult
from sync.summary import TableSummary


def test_a_summary_read_back_from_its_metadata_is_the_same_summary() -> None:
    stats = RequestStats(
        requests_by_endpoint={"GET /v1/brands": 2, "GET /v1/prompts/{id}/mentions": 40},
        retries_by_cause={"rate_limited": 3},
    )
    results = [
        WriteResult("t", rows_written=10, rows_deleted=4, columns_added=["b"]),
        WriteResult("t", rows_written=5, rows_deleted=0, columns_added=["a", "b"]),
    ]
    summary = TableSummary.of(results, stats, ["brand-2", "brand-1"])

    metadata = summary.metadata()
    assert metadata["rows_landed"] == 15 and metadata["rows_replaced"] == 4 and metadata["writes"] == 2
    assert metadata["requests_total"] == 42 and metadata["retries"] == 3
    assert metadata["columns_added"] == ["a", "b"]
    assert metadata["brands_out_of_scope"] == ["brand-1", "brand-2"]

    back = TableSummary.from_metadata(metadata)
    assert (back.rows_landed, back.rows_replaced, back.writes) == (15, 4, 2)
    assert back.requests_total == 42 and back.requests.total_retries == 3
    assert back.columns_added == ("a", "b") and back.brands_out_of_scope == ("brand-1", "brand-2")


def test_metadata_without_a_summary_reads_as_nothing_done() -> None:
    empty = TableSummary.from_metadata({"snapshot_at": "2026-11-23T00:00:00+00:00"})
    assert (empty.rows_landed, empty.requests_total, empty.brands_out_of_scope) == (0, 0, ())
