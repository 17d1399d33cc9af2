"""A dlt ``rest_api`` peer of ``visibility-sync run``: the same ten tables, into DuckDB.

    .venv/bin/python bench/dlt_peer.py --url http://127.0.0.1:8765 --key vsk_... --db peer.duckdb --days 2

The calls are those of our planner (``sync/planning.py``) over the newest ``--days``: the listings
(brands, topics, prompts, tracked competitors, generations) and, per brand, its answers and per
prompt its mentions over the window (no engine filter, the API's largest pages); then, per brand and
engine it is measured on and for the all-engine rollup (engine omitted): competitor trends over the
window (``day``, plus ``week`` over the whole ISO weeks of any Sunday in it), the most-cited pages
per day, and the citation trend of the brand's own domain and of each tracked competitor's domain
over the window. Every call is a ``rest_api`` resource; the fan-out over engines, days and domains
is a small ``@dlt.transformer`` its child resolves from. ``rest_api`` cannot leave a query
parameter out for some parent rows, so each such table is two resources (``engine`` given; the
rollup, without it) landing one table. dlt lands nested lists (series, competitors, aliases) as
child tables. dlt is a bench extra (``.[bench]``), never a dependency of the connector.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import dlt
from dlt.extract.resource import DltResource
from dlt.sources.rest_api import rest_api_resources

NEWEST = dt.date(2026, 10, 31)  # the sandbox's newest day with data (bench/daemon.py: SANDBOX_TODAY - 1)
Row = dict[str, Any]


def _listing(name: str, path: str, parent: str, **endpoint: Any) -> dict[str, Any]:
    """One call (paged) per row of ``parent``, its ``id`` in the path and in the rows."""
    endpoint["path"] = path.format(id=f"{{resources.{parent}.id}}")
    return {"name": name, "endpoint": endpoint, "include_from_parent": ["id"]}


def _cells(name: str, brands: DltResource, cells: Callable[[Row], Iterable[Row]]) -> list[DltResource]:
    """Two parents: ``cells(brand)`` per engine the brand is measured on (``name``), and for the
    all-engine rollup (``name_all``, engine ``all``)."""

    def fan_out(engines: Callable[[Row], list[str]]) -> Callable[[list[Row]], Iterator[list[Row]]]:
        def each(page: list[Row]) -> Iterator[list[Row]]:
            yield [
                {"brand_id": b["id"], "engine": e, **c} for b in page for e in engines(b) for c in cells(b)
            ]

        return each

    return [
        dlt.transformer(fan_out(engines), data_from=brands, name=n, selected=False)
        for n, engines in ((name, lambda b: b["engines"]), (f"{name}_all", lambda b: ["all"]))
    ]


def _unprefixed(prefix: str) -> Callable[[Row], Row]:
    """The parent's fields under their own names (``include_from_parent`` prefixes them)."""
    return lambda row: {k.removeprefix(prefix): v for k, v in row.items()}


def _per_engine(table: str, path: str, cells: str, fields: Iterable[str], **fixed: Any) -> list[dict]:
    """``table`` from one call per cell of ``cells`` (``engine`` given) and of ``cells_all``."""
    out = []
    for parent in (cells, f"{cells}_all"):
        ref = {f: f"{{resources.{parent}.{f}}}" for f in ("brand_id", "engine", *fields)}
        params = {f: ref[f] for f in fields} | ({} if parent.endswith("_all") else {"engine": ref["engine"]})
        out.append(
            {
                "name": f"{table}_all" if parent.endswith("_all") else table,
                "table_name": table,
                "endpoint": {
                    "path": path.format(brand_id=ref["brand_id"]),
                    "params": params | fixed,
                    "paginator": "single_page",
                },
                "include_from_parent": ["brand_id", "engine", *fields],
                # the parent's fields as plain columns, the same in both resources of the table
                "processing_steps": [{"map": _unprefixed(f"_{parent}_")}],
            }
        )
    return out


def _targets(name: str, trends: DltResource) -> DltResource:
    """A competitor trend (one brand and engine) -> its citation trend targets: the own domain, then
    each tracked competitor's domains (the planner's ``citation_targets``)."""

    def targets(page: list[Row]) -> Iterator[list[Row]]:
        for trend in (t for t in page if t["granularity"] == "day"):
            domains = [*trend["brand"]["domains"], *(d for c in trend["competitors"] for d in c["domains"])]
            cell = {k: trend[k] for k in ("brand_id", "engine", "from", "to")}
            yield [cell | {"domain": d} for d in dict.fromkeys(d.lower() for d in domains)]

    return dlt.transformer(targets, data_from=trends, name=name, selected=False)


@dlt.source(name="visibility")
def source(url: str, key: str, days: int) -> list[DltResource]:
    dates = [NEWEST - dt.timedelta(days=i) for i in reversed(range(days))]
    start, end = dates[0].isoformat(), (NEWEST + dt.timedelta(days=1)).isoformat()
    sundays = [d for d in dates if d.weekday() == 6]
    windows = [{"granularity": "day", "from": start, "to": end}]
    if sundays:  # a week is landed by the run that holds its Sunday: the whole ISO weeks of those
        monday, last = sundays[0] - dt.timedelta(days=6), sundays[-1] + dt.timedelta(days=1)
        windows.append({"granularity": "week", "from": monday.isoformat(), "to": last.isoformat()})
    window = {"from": start, "to": end}

    def resources(*configs: Any) -> dict[str, DltResource]:
        made = rest_api_resources(
            {
                "client": {
                    "base_url": url.rstrip("/") + "/v1/",
                    "auth": {"type": "bearer", "token": key},
                    "paginator": {"type": "cursor", "cursor_path": "next_cursor", "cursor_param": "cursor"},
                },
                "resource_defaults": {"write_disposition": "replace", "endpoint": {"data_selector": "data"}},
                "resources": list(configs),
            }
        )
        return {r.name: r for r in made}

    lists = resources(
        {"name": "brands", "endpoint": {"path": "brands", "params": {"limit": 999}}},
        _listing("topics", "brands/{id}/topics", "brands", params={"limit": 999}),
        _listing("prompts", "brands/{id}/prompts", "brands", params={"limit": 999}),
        _listing("tracked_competitors", "brands/{id}/tracked-competitors", "brands"),
        _listing("generations", "brands/{id}/generations", "brands", params={"limit": 999}),
        _listing("prompt_mentions", "prompts/{id}/mentions", "prompts", params={**window, "limit": 999}),
        _listing("answers", "brands/{id}/answers", "brands", params={**window, "limit": 100}),
    )
    brands = lists["brands"]
    parents = _cells("windows", brands, lambda _: windows)
    each_day = [{"from": d.isoformat(), "to": (d + dt.timedelta(days=1)).isoformat()} for d in dates]
    parents += _cells("days", brands, lambda _: each_day)
    trends = resources(
        *parents,
        *_per_engine(
            "competitor_trends",
            "brands/{brand_id}/competitors/trends",
            "windows",
            ("from", "to", "granularity"),
        ),
        *_per_engine("cited_pages", "brands/{brand_id}/citations/urls", "days", ("from", "to"), limit=2000),
    )
    cited = resources(
        _targets("targets", trends["competitor_trends"]),
        _targets("targets_all", trends["competitor_trends_all"]),
        *_per_engine(
            "citation_trends", "brands/{brand_id}/citations/trends", "targets", ("from", "to", "domain")
        ),
    )
    return [r for r in (lists | trends | cited).values() if r.selected]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--days", type=int, default=1)
    args = parser.parse_args(argv)
    pipeline = dlt.pipeline(
        pipeline_name=f"visibility_peer_{args.db.stem}",
        destination=dlt.destinations.duckdb(str(args.db)),
        dataset_name="dlt_peer",
        pipelines_dir=str(args.db.parent / "dlt-pipelines"),
    )
    info = pipeline.run(source(args.url, args.key, args.days))
    print(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
