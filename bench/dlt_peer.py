"""A small dlt ``rest_api`` peer of ``visibility-sync run``: the nearest set of tables, into DuckDB.

    .venv/bin/python bench/dlt_peer.py --url http://127.0.0.1:8765 --key vsk_... --db peer.duckdb --days 2

What a dlt user would write in a few lines: brands, topics, prompts, tracked competitors and
generations (replaced), and the newest ``--days`` of prompt mentions and answers, each resolved from
its parent resource (cited pages and trends need one call per day and engine, which ``rest_api``
cannot configure). dlt is a bench extra (``.[bench]``), never a dependency of the connector.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import dlt
from dlt.sources.rest_api import rest_api_source

NEWEST = dt.date(2026, 10, 31)  # the sandbox's newest day with data (bench/daemon.py: SANDBOX_TODAY - 1)


def _child(name: str, path: str, parent: str, param: str, *, paged: bool = True, **params: object) -> dict:
    """A resource with one call per row of ``parent`` (its ``id`` in the path as ``param``)."""
    endpoint: dict[str, object] = {
        "path": path,
        "params": {param: {"type": "resolve", "resource": parent, "field": "id"}, **params},
    }
    if not paged:
        endpoint["paginator"] = "single_page"
    return {"name": name, "endpoint": endpoint}


def source(url: str, key: str, days: int) -> object:
    start = (NEWEST - dt.timedelta(days=days - 1)).isoformat()
    end = (NEWEST + dt.timedelta(days=1)).isoformat()
    window = {"from": start, "to": end}
    return rest_api_source(
        {
            "client": {
                "base_url": url.rstrip("/") + "/v1/",
                "auth": {"type": "bearer", "token": key},
                "paginator": {"type": "cursor", "cursor_path": "next_cursor", "cursor_param": "cursor"},
            },
            "resource_defaults": {
                "write_disposition": "replace",
                "endpoint": {"data_selector": "data", "params": {"limit": 999}},
            },
            "resources": [
                {"name": "brands", "endpoint": {"path": "brands"}},
                _child("topics", "brands/{brand_id}/topics", "brands", "brand_id"),
                _child("prompts", "brands/{brand_id}/prompts", "brands", "brand_id"),
                _child(
                    "tracked_competitors",
                    "brands/{brand_id}/tracked-competitors",
                    "brands",
                    "brand_id",
                    paged=False,
                ),
                _child("generations", "brands/{brand_id}/generations", "brands", "brand_id", paged=False),
                _child("prompt_mentions", "prompts/{prompt_id}/mentions", "prompts", "prompt_id", **window),
                _child("answers", "brands/{brand_id}/answers", "brands", "brand_id", **window, limit=100),
            ],
        }
    )


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
