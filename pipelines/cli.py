"""``visibility-sync``: run, demo, check, sandbox (DESIGN.md's command line).

Exit codes (scripts rely on them; docs/OPERATIONS.md):

==  =======================================================================================
0   everything selected landed (``check``: the key works)
1   the sync failed or landed partially (a step failed, a requested brand was out of scope)
2   configuration or usage error, found before the first request (the message names the setting)
3   the service refused the key: invalid or revoked (401), subscription inactive (402),
    plan without API access or forbidden (403)
4   the service could not be reached or kept failing (network, 5xx, rate limits past the deadline,
    quota exceeded)
130 interrupted (Ctrl+C)
==  =======================================================================================
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pipelines.config import ConfigError, Settings, is_loopback, load_settings

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_CONFIG = 2
EXIT_REFUSED = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130

DEMO_DAYS = 14
CHECK_DEADLINE_SECONDS = 3.0
DEMO_WAREHOUSE = "duckdb:///data/visibility.duckdb"

console = Console(stderr=False, highlight=False)
err = Console(stderr=True, highlight=False)


# ---------------------------------------------------------------------------------------------
# errors -> exit codes


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code of an exception raised by a sync or a check."""
    from resources.api import errors as E
    from resources.warehouse.resource import WarehouseConfigError

    if isinstance(exc, (ConfigError, E.ConfigurationError, WarehouseConfigError)):
        return EXIT_CONFIG
    if isinstance(exc, (E.AuthenticationError, E.SubscriptionRequiredError, E.PermissionDeniedError)):
        return EXIT_REFUSED
    if isinstance(
        exc, (E.ServerError, E.TransportError, E.RateLimitError, E.QuotaExceededError, E.PagingError)
    ):
        return EXIT_UNAVAILABLE
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_PARTIAL


def _root_cause(exc: BaseException) -> BaseException:
    """The API error behind a Dagster step failure, when there is one."""
    from resources.api.errors import VisibilityAPIError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (VisibilityAPIError, ConfigError)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return exc


# ---------------------------------------------------------------------------------------------
# run


@dataclass
class RunSummary:
    """What a sync landed, per asset, and what failed."""

    rows: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    out_of_scope: set[str] = field(default_factory=set)
    failures: list[tuple[str, str, int]] = field(default_factory=list)  # (asset/run, message, code)

    @property
    def stops(self) -> bool:
        """A failure that later runs would only repeat (refused key, configuration error)."""
        return any(_stops_the_sync(code) for _, _, code in self.failures)

    def merge(self, other: RunSummary) -> None:
        for name, count in other.rows.items():
            self.rows[name] = self.rows.get(name, 0) + count
        for name, count in other.requests.items():
            self.requests[name] = self.requests.get(name, 0) + count
        self.out_of_scope |= other.out_of_scope
        self.failures.extend(other.failures)

    @property
    def exit_code(self) -> int:
        if self.failures:
            return max(code for _, _, code in self.failures)
        return EXIT_PARTIAL if self.out_of_scope else EXIT_OK


def _parse_date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date YYYY-MM-DD: {value!r}") from None


def default_window(today: dt.date, lookback_days: int) -> tuple[dt.date, dt.date]:
    """Yesterday and the lookback days before it, as ``[start, end)``."""
    return today - dt.timedelta(days=1 + lookback_days), today


def engine_groups(selected: Sequence[str], order: Sequence[str]) -> list[tuple[str, str]]:
    """Selected engines as contiguous ``(first, last)`` spans of ``order``: one run range each."""
    wanted = [e for e in order if e in set(selected)]
    spans: list[tuple[str, str]] = []
    previous = -2
    for engine in wanted:
        index = order.index(engine)
        if spans and index == previous + 1:
            spans[-1] = (spans[-1][0], engine)
        else:
            spans.append((engine, engine))
        previous = index
    return spans


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A rich progress bar per asset, fed by the assets' progress hook."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from assets import progress as hook

    if not enabled:
        yield None
        return
    bar = Progress(
        TextColumn("{task.description:<20}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("calls"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    tasks: dict[str, Any] = {}

    def listener(asset: str, done: int, total: int) -> None:
        if asset not in tasks:
            tasks[asset] = bar.add_task(asset, total=total)
        bar.update(tasks[asset], completed=done, total=total)

    with bar, hook.listening(listener):
        yield bar


def _collect(result: Any, summary: RunSummary, label: str) -> None:
    """Rows and requests from the run's materializations; failures with their exit codes.

    A single-run range emits one event per partition with the same metadata, so within a run each
    asset counts once (the max); a sync split into several runs (non-adjacent engines) adds them up.
    """
    rows: dict[str, int] = {}
    requests: dict[str, int] = {}
    for event in result.all_events:
        if event.event_type_value == "ASSET_MATERIALIZATION":
            mat = event.event_specific_data.materialization
            name = mat.asset_key.to_user_string()
            meta = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
            rows[name] = max(rows.get(name, 0), int(meta.get("rows_landed", 0) or 0))
            requests[name] = max(requests.get(name, 0), int(meta.get("requests_total", 0) or 0))
            summary.out_of_scope.update(meta.get("brands_out_of_scope") or [])
    for name, count in rows.items():
        summary.rows[name] = summary.rows.get(name, 0) + count
    for name, count in requests.items():
        summary.requests[name] = summary.requests.get(name, 0) + count
    if result.success:
        return
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            data = event.event_specific_data
            error = getattr(data, "error", None)
            message = _innermost_message(error) if error is not None else "step failed"
            code = _failure_code(error)
            summary.failures.append((f"{label}: {event.step_key}", message, code))
    if not summary.failures:
        summary.failures.append((label, "run failed", EXIT_PARTIAL))


def _innermost_message(error: Any) -> str:
    """The message of the error at the end of a serialized cause chain.

    Dagster wraps what an op raised ("Error occurred while executing op ..."); the API error inside
    says what went wrong, with its code and X-Request-Id.
    """
    seen: set[int] = set()
    while id(error) not in seen:
        seen.add(id(error))
        inner = error.cause or getattr(error, "context", None)
        if inner is None:
            break
        error = inner
    text = (error.message or "").strip() or "step failed"
    qualified, sep, rest = text.partition(": ")
    if sep and qualified.endswith(error.cls_name or "\0"):  # module path -> class name
        return f"{error.cls_name}: {rest}"
    return text


def _stops_the_sync(code: int) -> bool:
    """A refused key or a configuration error fails every later run the same way: start no more."""
    return code in (EXIT_CONFIG, EXIT_REFUSED)


def _failure_code(error: Any) -> int:
    """Map a serialized step error back to an exit code by its class name (the chain is serialized)."""
    names: list[str] = []
    while error is not None:
        names.append(error.cls_name or "")
        error = error.cause or getattr(error, "context", None)
    table = {
        "ConfigurationError": EXIT_CONFIG,
        "ConfigError": EXIT_CONFIG,
        "WarehouseConfigError": EXIT_CONFIG,
        "AuthenticationError": EXIT_REFUSED,
        "SubscriptionRequiredError": EXIT_REFUSED,
        "PermissionDeniedError": EXIT_REFUSED,
        "ServerError": EXIT_UNAVAILABLE,
        "TransportError": EXIT_UNAVAILABLE,
        "RateLimitError": EXIT_UNAVAILABLE,
        "QuotaExceededError": EXIT_UNAVAILABLE,
    }
    for name in names:
        if name in table:
            return table[name]
    return EXIT_PARTIAL


def sync(
    settings: Settings,
    start: dt.date,
    end: dt.date,
    engines: Sequence[str],
    brands: Sequence[str] = (),
    *,
    show_progress: bool = True,
    verbose: bool = False,
) -> RunSummary:
    """Snapshots, then the daily and rollup assets over ``[start, end)`` x engines, in process.

    The daily and rollup runs go side by side (one thread each) and share one request budget, so the
    key's rate limit is spent back to back while one run lands or starts; runs of one kind (a split
    engine selection) go one after the other, and so does everything when ``DAGSTER_HOME`` records
    the runs (see below). Stops starting runs after one fails on a refused key
    or a configuration error. Dagster's console log (with its stack traces) shows only when
    ``verbose``; the summary prints each failure's own message.
    """
    from dagster import DagsterInstance, materialize

    from assets.facts import fact_assets
    from assets.partitions import ENGINES, ENGINES_WITH_ALL
    from assets.snapshots import snapshot_assets
    from assets.trends import trend_assets
    from pipelines.resources import build_resources  # not the code location: no sensor settings
    from pipelines.schedules import range_tags
    from resources.api.resource import shared_budget

    api_url, api_key = settings.require_api()
    resources = build_resources(settings)
    base_tags: dict[str, str] = {}
    if brands:
        base_tags["visibility/brands"] = ",".join(brands)
    log_level = "INFO" if verbose else "CRITICAL"  # step failures log at ERROR with stack traces
    quiet = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    last = end - dt.timedelta(days=1)
    recorded = bool(os.environ.get("DAGSTER_HOME"))  # runs recorded where the UI shows them

    def run(label: str, assets: list[Any], tags: dict[str, str], into: RunSummary) -> None:
        # an ephemeral instance per run: in-memory storage is not shared across threads
        with DagsterInstance.get() if recorded else DagsterInstance.ephemeral() as instance:
            result = materialize(
                assets,
                instance=instance,
                resources=resources,
                tags={**base_tags, **tags},
                run_config=quiet,
                raise_on_error=False,
            )
        _collect(result, into, label)

    summary = RunSummary()
    with _progress(show_progress), shared_budget(api_url, api_key):
        run("snapshots", list(snapshot_assets), {}, summary)
        if summary.stops:
            return summary
        lanes: list[Lane] = []
        for label, assets, order in (
            ("daily", fact_assets, ENGINES),
            ("rollups", trend_assets, ENGINES_WITH_ALL),
        ):
            lanes.append(
                [
                    (f"{label} {first}..{final}", list(assets), range_tags(start, last, (first, final)))
                    for first, final in engine_groups(engines, order)
                ]
            )
        if recorded:
            # a recorded run captures its step output by redirecting the process's stdout and
            # stderr to files; two runs at once would tangle the redirections: one after the other
            lanes = [[r for lane in lanes for r in lane]]
        for lane_summary in run_lanes(lanes, run):
            summary.merge(lane_summary)
    return summary


Lane = list[tuple[str, list[Any], dict[str, str]]]


def run_lanes(
    lanes: Sequence[Lane], run: Callable[[str, list[Any], dict[str, str], RunSummary], None]
) -> list[RunSummary]:
    """Each lane's runs one after the other, the lanes side by side; one summary per lane, in order.

    After a run that stops the sync (a refused key, a configuration error), no lane starts another.
    The threads are daemons: on Ctrl+C the command exits at once, and a run cut short leaves each
    write as it was (every write is one transaction).
    """
    summaries = [RunSummary() for _ in lanes]

    def drive(lane: Lane, into: RunSummary) -> None:
        for label, assets, tags in lane:
            if any(s.stops for s in summaries):
                return
            try:
                run(label, assets, tags, into)
            except Exception as exc:  # not a step failure (those are in the result): the run itself
                into.failures.append((label, f"{type(exc).__name__}: {exc}", exit_code_for(exc)))

    threads = [
        threading.Thread(target=drive, args=(lane, into), daemon=True, name=f"visibility-lane-{i}")
        for i, (lane, into) in enumerate(zip(lanes, summaries, strict=True))
        if lane
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # a timed join, so Ctrl+C reaches this thread
            thread.join(timeout=0.5)
    return summaries


def check_warehouse(settings: Settings) -> None:
    """Prove the warehouse takes writes before the first request spends the API's rate budget."""
    from urllib.parse import urlsplit

    from resources.warehouse.resource import redact_url, warehouse_from_url

    try:
        with warehouse_from_url(settings.warehouse_url, settings.schema_name) as warehouse:
            warehouse.check_connection()
    except ConfigError:
        raise
    except Exception as exc:
        detail = (str(exc).strip().splitlines() or [""])[0]
        password = urlsplit(settings.warehouse_url).password
        if password:
            detail = detail.replace(password, "***")
        raise ConfigError(
            f"VISIBILITY_WAREHOUSE {redact_url(settings.warehouse_url)} cannot be reached or written "
            f"({type(exc).__name__}: {detail}); nothing was requested from the API"
        ) from None


def _table_counts(settings: Settings) -> dict[str, int | None]:
    """Rows per landed table, read back from the warehouse (None: table absent)."""
    from assets.tables import ALL_TABLES
    from resources.warehouse.queries import row_count
    from resources.warehouse.resource import warehouse_from_url

    with warehouse_from_url(settings.warehouse_url, settings.schema_name) as warehouse:
        return {name: row_count(warehouse, name) for name in ALL_TABLES}


def print_summary(summary: RunSummary, settings: Settings, start: dt.date, end: dt.date) -> None:
    table = Table(title=f"Landed {start} .. {end} (end exclusive) into {_redact(settings.warehouse_url)}")
    table.add_column("table")
    table.add_column("rows landed this run", justify="right")
    table.add_column("rows in table", justify="right")
    table.add_column("API requests", justify="right")
    try:
        counts = _table_counts(settings)
    except Exception as exc:  # the summary must not hide the run's own result
        err.print(f"[yellow]could not read table sizes back: {type(exc).__name__}[/yellow]")
        counts = {}
    for name in sorted(set(summary.rows) | {k for k, v in counts.items() if v is not None}):
        total = counts.get(name)
        table.add_row(
            name,
            str(summary.rows.get(name, "-")),
            "-" if total is None else str(total),
            str(summary.requests.get(name, "-")),
        )
    console.print(table)
    for brand in sorted(summary.out_of_scope):
        err.print(
            f"[yellow]warning:[/yellow] brand {brand} is out of this key's scope (404): "
            "skipped, its rows untouched"
        )
    for where, message, code in summary.failures:
        err.print(f"[red]failed[/red] {where}: {message} (exit {code})")


def _redact(url: str) -> str:
    """A warehouse URL without its password (the warehouse module's rule, percent-encoding included)."""
    from resources.warehouse.resource import redact_url

    return redact_url(url)


def cmd_run(args: argparse.Namespace) -> int:
    from assets.partitions import ENGINES_WITH_ALL

    settings = load_settings()
    settings.require_api()
    today = dt.datetime.now(dt.UTC).date()
    start, end = default_window(today, settings.lookback_days)
    start = args.start or start
    end = args.end or end
    if start >= end:
        raise ConfigError(f"--start {start} must be before --end {end} (end is exclusive)")
    if start < settings.start_date:
        raise ConfigError(
            f"--start {start} is before the first partition {settings.start_date}; "
            "set VISIBILITY_START_DATE earlier"
        )
    if end > today:
        raise ConfigError(
            f"--end {end} is after today: the newest partition is yesterday, so --end is at most {today}"
        )
    engines = args.engine or list(ENGINES_WITH_ALL)
    unknown = sorted(set(engines) - set(ENGINES_WITH_ALL))
    if unknown:
        raise ConfigError(f"--engine {', '.join(unknown)} unknown; use {', '.join(ENGINES_WITH_ALL)}")
    check_warehouse(settings)
    summary = sync(
        settings, start, end, engines, args.brand or (), show_progress=not args.quiet, verbose=args.verbose
    )
    print_summary(summary, settings, start, end)
    return summary.exit_code


# ---------------------------------------------------------------------------------------------
# check


def check(settings: Settings) -> str:
    """One ``GET /v1/brands`` (first page only); raises the typed error that says what is wrong."""
    from resources.api.resource import VisibilityAPIResource

    url, key = settings.require_api()
    # a check answers quickly: a few seconds of retries, not a sync's patience
    resource = VisibilityAPIResource(
        api_url=url, api_key=key, timeout_seconds=10.0, retry_deadline_seconds=CHECK_DEADLINE_SECONDS
    )
    with resource.get_client() as client:
        first = next(iter(client.list_brands(limit=999)), None)
    if first is None:
        return f"OK: {url} accepted the key and the subscription is active, but the key reaches no brand"
    return f"OK: {url} accepted the key; the subscription is active and brands are reachable"


def cmd_check(args: argparse.Namespace) -> int:
    settings = load_settings()
    console.print(check(settings))
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# demo and sandbox


def cmd_demo(args: argparse.Namespace) -> int:
    from sandbox.config import SandboxConfig
    from sandbox.testing import run_sandbox

    warehouse = os.environ.get("VISIBILITY_WAREHOUSE") or DEMO_WAREHOUSE
    if warehouse.startswith("duckdb:///") and not warehouse.startswith("duckdb:////"):
        os.makedirs(os.path.dirname(warehouse.removeprefix("duckdb:///")) or ".", exist_ok=True)
    today = dt.datetime.now(dt.UTC).date()
    console.print("Starting the sandbox on loopback...")
    with run_sandbox(SandboxConfig(seed=args.seed, today=today)) as sandbox:
        os.environ["VISIBILITY_API_URL"] = sandbox.url
        os.environ["VISIBILITY_API_KEY"] = sandbox.keys["workspace"]
        os.environ["VISIBILITY_WAREHOUSE"] = warehouse
        settings = load_settings()
        start, end = today - dt.timedelta(days=args.days), today
        console.print(f"Sandbox at {sandbox.url}; syncing {start} .. {end} (end exclusive) into {warehouse}")
        from assets.partitions import ENGINES_WITH_ALL

        check_warehouse(settings)
        summary = sync(
            settings, start, end, ENGINES_WITH_ALL, show_progress=not args.quiet, verbose=args.verbose
        )
        print_summary(summary, settings, start, end)
    if summary.exit_code == EXIT_OK:
        path = warehouse.removeprefix("duckdb:///")
        catalog = Path(path).name.split(".", 1)[0]  # DuckDB names the catalog after the file
        table = f"{catalog}.{settings.schema_name}.prompt_mentions"
        console.print(
            f"Done. Query it read-only (catalog {catalog}, schema {settings.schema_name}):\n"
            f"  python -c \"import duckdb; duckdb.connect('{path}', read_only=True)"
            f".sql('SELECT engine, count(*) FROM {table} GROUP BY ALL').show()\"",
            soft_wrap=True,
        )
    return summary.exit_code


def cmd_sandbox(args: argparse.Namespace) -> int:
    from sandbox.config import SandboxConfig
    from sandbox.faults import FaultsConfig
    from sandbox.server import serve_forever

    if not is_loopback(args.host):
        raise ConfigError(f"--host {args.host!r} is not a loopback address: the sandbox serves this machine")
    faults = FaultsConfig(profile=args.faults, seed=args.seed)
    serve_forever(SandboxConfig(seed=args.seed, size=args.size, faults=faults), args.host, args.port)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="visibility-sync",
        description="Land AI-search brand-visibility data in DuckDB, Postgres or BigQuery, through Dagster.",
        epilog="Exit codes: 0 ok, 1 failed or partial, 2 configuration error, 3 key refused "
        "(401/402/403), 4 service unavailable, 130 interrupted.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run", help="materialize every asset for a date range (default: yesterday + lookback)"
    )
    run.add_argument("--start", type=_parse_date, help="first date, YYYY-MM-DD (inclusive)")
    run.add_argument("--end", type=_parse_date, help="end date, YYYY-MM-DD (exclusive)")
    run.add_argument(
        "--engine", action="append", metavar="E", help="engine to sync (repeatable; `all` = rollup)"
    )
    run.add_argument("--brand", action="append", metavar="ID", help="only this brand id (repeatable)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--verbose", action="store_true", help="Dagster's own log, stack traces included")
    run.set_defaults(handler=cmd_run)

    demo = sub.add_parser("demo", help="start the sandbox, sync two weeks into data/visibility.duckdb")
    demo.add_argument("--days", type=int, default=DEMO_DAYS, help="days to sync (default 14)")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.add_argument("--verbose", action="store_true", help="Dagster's own log, stack traces included")
    demo.set_defaults(handler=cmd_demo)

    chk = sub.add_parser("check", help="validate URL, key and subscription with one GET /v1/brands")
    chk.set_defaults(handler=cmd_check)

    sb = sub.add_parser("sandbox", help="serve the local sandbox and print its URL and demo key")
    sb.add_argument("--host", default="127.0.0.1")
    sb.add_argument("--port", type=int, default=8765)
    sb.add_argument("--seed", type=int, default=7)
    sb.add_argument("--faults", default="none", choices=("none", "flaky", "hostile"), help="fault profile")
    sb.add_argument("--size", default="demo", choices=("demo", "large"), help="world size")
    sb.set_defaults(handler=cmd_sandbox)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        cause = _root_cause(exc)
        code = exit_code_for(cause)
        label = "configuration error" if code == EXIT_CONFIG else "error"
        err.print(f"[red]{label}:[/red] {cause}")
        return code


if __name__ == "__main__":
    sys.exit(main())
