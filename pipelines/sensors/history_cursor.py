"""Pure state machine of the competitor history sensor: cursor in, backfill decisions out.

After a competitor is tracked, the service backfills its history and ``history_from`` stays null
until that ends. When it turns into a date, the trend partitions from that date onward hold stale
numbers (computed without the competitor) and must be fetched again, once.

A competitor is *due* when its ``history_from`` is a date and either

* the cursor saw it with a null ``history_from`` (the transition itself), or
* the cursor has never seen it but is past its first tick (tracked and backfilled between ticks).

On the very first tick the sensor only takes a baseline: competitors already complete then were
backfilled before this connector watched them. Each tracking episode (competitor id and
``tracked_since``) fires once: ``requested`` remembers it, so untracking and tracking again fires
again, and nothing else does.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pipelines.sensors.audit_cursor import CursorError

CURSOR_VERSION = 1
_UNSEEN = object()


@dataclass(frozen=True)
class ObservedCompetitor:
    """One tracked competitor as the API lists it now."""

    brand_id: str
    competitor_id: str
    history_from: dt.date | None
    tracked_since: str | None = None

    @property
    def key(self) -> str:
        return f"{self.brand_id}:{self.competitor_id}"

    @property
    def episode(self) -> str:
        """One tracking episode: a re-tracked competitor is a new episode."""
        return f"{self.key}:{self.tracked_since or ''}"


@dataclass(frozen=True)
class HistoryState:
    initialized: bool = False
    #: "brand:competitor" -> history_from (ISO date) or None while backfilling
    seen: Mapping[str, str | None] = field(default_factory=dict)
    #: tracking episode -> the history_from it was requested from
    requested: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HistoryBackfill:
    """Refetch the trend partitions of every engine from ``start`` onward, for this competitor."""

    competitor: ObservedCompetitor
    start: dt.date


def parse_cursor(raw: str | None) -> HistoryState:
    if not raw:
        return HistoryState()
    try:
        doc = json.loads(raw)
        if doc.get("version") != CURSOR_VERSION:
            raise CursorError(
                f"competitor history cursor has version {doc.get('version')!r}, expected {CURSOR_VERSION}"
            )
        return HistoryState(
            initialized=bool(doc.get("initialized", False)),
            seen={str(k): (None if v is None else str(v)) for k, v in doc.get("seen", {}).items()},
            requested={str(k): str(v) for k, v in doc.get("requested", {}).items()},
        )
    except CursorError:
        raise
    except (ValueError, TypeError, AttributeError) as exc:
        raise CursorError(f"competitor history cursor is not valid: {exc!r}") from exc


def dump_cursor(state: HistoryState) -> str:
    doc = {
        "version": CURSOR_VERSION,
        "initialized": state.initialized,
        "seen": dict(sorted(state.seen.items())),
        "requested": dict(sorted(state.requested.items())),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def advance(
    state: HistoryState,
    observed: Iterable[ObservedCompetitor],
    *,
    listed_brands: Iterable[str],
) -> tuple[HistoryState, list[HistoryBackfill]]:
    """Fold one listing into the state; return the backfills that are due now.

    ``listed_brands`` are the brands whose competitors were listed successfully this tick: only their
    entries are replaced, so a brand that failed to list keeps its memory.
    """
    listed = set(listed_brands)
    seen = {k: v for k, v in state.seen.items() if k.split(":", 1)[0] not in listed}
    requested = dict(state.requested)
    due: list[HistoryBackfill] = []
    for competitor in observed:
        before = state.seen.get(competitor.key, _UNSEEN)
        now_from = competitor.history_from
        seen[competitor.key] = None if now_from is None else now_from.isoformat()
        if now_from is None or competitor.episode in requested:
            continue
        transitioned = before is None or (before is _UNSEEN and state.initialized)
        if transitioned:
            requested[competitor.episode] = now_from.isoformat()
            due.append(HistoryBackfill(competitor=competitor, start=now_from))
    return HistoryState(initialized=True, seen=seen, requested=requested), due


def partition_keys_from(start: dt.date, keys: Sequence[str]) -> list[str]:
    """The ``date|engine`` keys dated ``start`` or later, in the partitions definition's order."""
    cutoff = start.isoformat()
    return [k for k in keys if str(k).split("|", 1)[0] >= cutoff]
