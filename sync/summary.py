"""What a sync did to one table: the one vocabulary of the tables' asset metadata
(:meth:`TableSummary.metadata`) and of the command line's summary (:meth:`TableSummary.from_metadata`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from resources.api.stats import RequestStats
from resources.warehouse.contract import WriteResult


@dataclass(frozen=True)
class TableSummary:
    """Rows written and requests made for one table by one run (or one step of it)."""

    rows_landed: int = 0
    rows_replaced: int = 0
    writes: int = 0
    columns_added: tuple[str, ...] = ()
    requests: RequestStats = field(default_factory=RequestStats)
    #: brands the key cannot reach (404): their rows were left untouched
    brands_out_of_scope: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, results: Sequence[WriteResult], requests: RequestStats, brands_out_of_scope: Sequence[str] = ()
    ) -> TableSummary:
        return cls(
            rows_landed=sum(r.rows_written for r in results),
            rows_replaced=sum(r.rows_deleted for r in results),
            writes=len(results),
            columns_added=tuple(sorted({c for r in results for c in r.columns_added})),
            requests=requests,
            brands_out_of_scope=tuple(sorted(brands_out_of_scope)),
        )

    def metadata(self) -> dict[str, Any]:
        """JSON-ready values (numbers, lists, dicts); the Dagster layer wraps the containers."""
        stats = self.requests.to_metadata()
        return {
            "rows_landed": self.rows_landed,
            "rows_replaced": self.rows_replaced,
            "writes": self.writes,
            "columns_added": list(self.columns_added),
            "requests_total": self.requests.total_requests,
            "requests_by_endpoint": stats["requests_by_endpoint"],
            "retries": self.requests.total_retries,
            "retries_by_cause": stats["retries_by_cause"],
            "wait_seconds": stats["wait_seconds"],
            "errors_by_code": stats["errors_by_code"],
            "unknown_engine_rows": stats["unknown_engine_rows"],
            "brands_out_of_scope": list(self.brands_out_of_scope),
        }

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> TableSummary:
        """The summary a materialization's metadata carries (values unwrapped); what it lacks is 0."""
        requests = RequestStats(
            requests_by_endpoint=dict(metadata.get("requests_by_endpoint") or {}),
            retries_by_cause=dict(metadata.get("retries_by_cause") or {}),
        )
        return cls(
            rows_landed=int(metadata.get("rows_landed") or 0),
            rows_replaced=int(metadata.get("rows_replaced") or 0),
            writes=int(metadata.get("writes") or 0),
            columns_added=tuple(metadata.get("columns_added") or ()),
            requests=requests,
            brands_out_of_scope=tuple(metadata.get("brands_out_of_scope") or ()),
        )

    @property
    def requests_total(self) -> int:
        return self.requests.total_requests
