"""A page's rows validated and rid of engines outside the spec's seven (they fit no partition)."""

from __future__ import annotations

import logging
import time
from typing import Any

from resources.api import endpoints as ep
from resources.api.redaction import API_LOGGER, sanitize
from resources.api.stats import Counters

Row = dict[str, Any]

logger = logging.getLogger(API_LOGGER)

#: At most one warning about rows with an unknown engine per endpoint this often (per client).
_UNKNOWN_ENGINE_WARN_EVERY_SECONDS = 30.0


class EngineFilter:
    """Validates a page's rows and drops those of unknown engines, counted and warned about."""

    def __init__(self, counters: Counters) -> None:
        self._counters = counters
        self._warned_at: dict[str, float] = {}

    def page_rows(self, endpoint: ep.Endpoint, rows: list[Any], request_id: str | None) -> list[Row]:
        """A page's rows validated (with the page's request id) and rid of unknown engines."""
        checked = endpoint.validate_rows(rows, request_id=request_id)
        if not endpoint.engine_rows:
            return checked
        known = [row for row in checked if row.get("engine") in ep.ENGINE_SET]
        if len(known) != len(checked):
            self._drop(endpoint, checked, len(checked) - len(known), request_id)
        return known

    def _drop(self, endpoint: ep.Endpoint, rows: list[Row], dropped: int, request_id: str | None) -> None:
        """Rows of an engine the spec does not list cannot land in any partition: count and warn."""
        total = self._counters.unknown_engine(endpoint.key, dropped)
        now = time.monotonic()
        last = self._warned_at.get(endpoint.key)
        if last is not None and now - last < _UNKNOWN_ENGINE_WARN_EVERY_SECONDS:
            return
        self._warned_at[endpoint.key] = now
        values = sorted({str(row.get("engine")) for row in rows if row.get("engine") not in ep.ENGINE_SET})
        logger.warning(
            "%s: dropped %d row(s) with an engine outside the spec's seven (%s); %d so far in this client%s",
            endpoint.key,
            dropped,
            ", ".join(sanitize(v, 40) for v in values[:5]),
            total,
            f" [X-Request-Id {request_id}]" if request_id else "",
        )
