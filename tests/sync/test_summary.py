"""A table's metadata sums its writes and counts its requests: what the assets write and the CLI reads."""

from __future__ import annotations

from resources.api.stats import RequestStats
from resources.warehouse.contract import WriteResult
from sync.driver import landed_metadata


def test_a_tables_metadata_sums_its_writes_and_counts_its_requests() -> None:
    stats = RequestStats(
        requests_by_endpoint={"GET /v1/brands": 2, "GET /v1/prompts/{id}/mentions": 40},
        retries_by_cause={"rate_limited": 3},
    )
    results = [
        WriteResult("t", rows_written=10, rows_deleted=4, columns_added=["b"]),
        WriteResult("t", rows_written=5, rows_deleted=0, columns_added=["a", "b"]),
    ]
    metadata = landed_metadata(results, stats, ["brand-2", "brand-1"])
    assert metadata["rows_landed"] == 15 and metadata["rows_replaced"] == 4 and metadata["writes"] == 2
    assert metadata["requests_total"] == 42 and metadata["retries"] == 3
    assert metadata["retries_by_cause"] == {"rate_limited": 3}
    assert metadata["columns_added"] == ["a", "b"]
    assert metadata["brands_out_of_scope"] == ["brand-1", "brand-2"]
