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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape  # server texts ("[endpoint ...]") are not markup
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
err = Console(stderr=True, highlight=False, soft_wrap=True)  # one error, one line, even in a pipe


# ---------------------------------------------------------------------------------------------
# errors -> exit codes


def exit_codes() -> list[tuple[type[BaseException], int]]:
    """The one map from exception types to exit codes, first match wins (subclasses first).

    Used for live exceptions and, by class name, for the serialized errors of a Dagster step.
    """
    from dagster._core.errors import DagsterExecutionInterruptedError

    from resources.api import errors as E
    from resources.warehouse.base import WarehouseConfigError

    return [
        (ConfigError, EXIT_CONFIG),
        (E.ConfigurationError, EXIT_CONFIG),
        (WarehouseConfigError, EXIT_CONFIG),
        (E.AuthenticationError, EXIT_REFUSED),
        (E.SubscriptionRequiredError, EXIT_REFUSED),
        (E.PermissionDeniedError, EXIT_REFUSED),
        (E.ServerError, EXIT_UNAVAILABLE),
        (E.TransportError, EXIT_UNAVAILABLE),
        (E.RateLimitError, EXIT_UNAVAILABLE),
        (E.QuotaExceededError, EXIT_UNAVAILABLE),
        (E.PagingError, EXIT_UNAVAILABLE),
        (E.ResponseShapeError, EXIT_UNAVAILABLE),
        (E.SyncCancelled, EXIT_INTERRUPTED),
        (DagsterExecutionInterruptedError, EXIT_INTERRUPTED),
        (KeyboardInterrupt, EXIT_INTERRUPTED),
    ]


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code of an exception raised by a sync or a check."""
    for kind, code in exit_codes():
        if isinstance(exc, kind):
            return code
    return EXIT_PARTIAL


def exit_code_by_name(class_names: Sequence[str]) -> int:
    """The exit code of a serialized error chain (class names, outermost first)."""
    by_name: dict[str, int] = {}

    def name_all(kind: type[BaseException], code: int) -> None:
        by_name.setdefault(kind.__name__, code)
        for sub in kind.__subclasses__():
            name_all(sub, code)

    for kind, code in exit_codes():
        name_all(kind, code)
    for name in class_names:
        if name in by_name:
            return by_name[name]
    return EXIT_PARTIAL


def _root_cause(exc: BaseException) -> BaseException:
    """The API error behind a Dagster step failure, when there is one."""
    from resources.api.errors import SyncCancelled, VisibilityAPIError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (VisibilityAPIError, ConfigError, SyncCancelled)):
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
    skipped: list[str] = field(default_factory=list)  # steps not run because an earlier one failed

    @property
    def stops(self) -> bool:
        """A failure that later runs would only repeat (refused key, configuration error)."""
        return any(_stops_the_sync(code) for _, _, code in self.failures)

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
    started = {e.step_key for e in result.all_events if e.event_type_value == "STEP_START"}
    # Dagster records nothing for a step whose upstream step failed: it simply never starts
    summary.skipped.extend(
        f"{label}: {node.name}" for node in result.job_def.nodes if node.name not in started
    )
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
    """Map a serialized step error back to an exit code by its class names (the chain is serialized)."""
    names: list[str] = []
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        names.append(error.cls_name or "")
        error = error.cause or getattr(error, "context", None)
    return exit_code_by_name(names)


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
    """Run the ``visibility_sync`` job over ``[start, end)`` x engines, in this process.

    The very job the daily schedule launches (same steps, metadata and asset checks), with the same
    range tags; with ``DAGSTER_HOME`` set its runs are recorded where the UI shows them. An engine
    selection that is not one contiguous range of Dagster's engine order needs one run per range: the
    first is the whole sync, the others re-run only the date x engine tables (``visibility_daily``).
    The runs share one request budget and one set of brand, prompt and competitor listings
    (``visibility/sync`` tag). Stops starting runs after one fails on a refused key or a
    configuration error. Dagster's console log (with its stack traces) shows only when ``verbose``;
    the summary prints each failure's own message.
    """
    import uuid

    from dagster import DagsterInstance

    from assets.discovery import BRANDS_TAG, SYNC_TAG
    from assets.partitions import ENGINES_WITH_ALL
    from pipelines.jobs import DAILY_JOB, SYNC_JOB
    from pipelines.orphans import fail_orphaned_runs, process_tags
    from pipelines.schedules import range_tags
    from pipelines.syncs import sync_definitions
    from resources.api.resource import shared_budget

    api_url, api_key = settings.require_api()
    definitions = sync_definitions(settings)
    base_tags = {SYNC_TAG: uuid.uuid4().hex, "visibility/launched_by": "visibility-sync"}
    if brands:
        base_tags[BRANDS_TAG] = ",".join(brands)
    log_level = "INFO" if verbose else "CRITICAL"  # step failures log at ERROR with stack traces
    quiet = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    last = end - dt.timedelta(days=1)
    recorded = bool(os.environ.get("DAGSTER_HOME"))  # runs recorded where the UI shows them
    spans = engine_groups(engines, ENGINES_WITH_ALL)

    if recorded:
        base_tags.update(process_tags())  # lets a later command tell that a killed run's process is gone

    summary = RunSummary()
    with (
        _progress(show_progress) as bar,
        shared_budget(api_url, api_key, retry_deadline_seconds=settings.retry_deadline_seconds) as budget,
        _status_lines(budget, bar),
        _recording_instance() if recorded else DagsterInstance.ephemeral() as instance,
    ):
        if recorded:
            fail_orphaned_runs(instance, lambda line: err.print(f"[yellow]note:[/yellow] {escape(line)}"))
        for index, (first, final) in enumerate(spans):
            job_name = SYNC_JOB if index == 0 else DAILY_JOB
            label = f"{job_name} {first}..{final}"
            result = definitions.resolve_job_def(job_name).execute_in_process(
                instance=instance,
                tags={**base_tags, **range_tags(start, last, (first, final))},
                run_config=quiet,
                raise_on_error=False,
            )
            _collect(result, summary, label)
            if summary.stops or budget.cancelled:
                break
    return summary


def _recording_instance() -> Any:
    """``DAGSTER_HOME``'s instance, created under a file lock: two commands started together on a
    new home would otherwise race to create Dagster's SQLite tables ("table ... already exists")."""
    import fcntl

    from dagster import DagsterInstance

    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".visibility-sync.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            instance = DagsterInstance.get()
            instance.get_runs(limit=1)  # every storage created before the lock is let go
            return instance
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def _status_lines(budget: Any, bar: Any) -> Iterator[None]:
    """Say what the sync waits for, as it waits: the rate limit, Retry-After, an unreachable service,
    the DuckDB file lock (the client's ``on_wait`` hook and the ``visibility.*`` loggers' warnings)."""
    import logging
    import time

    target = bar.console if bar is not None else err
    last: dict[str, float] = {}

    def say(cause: str, message: str) -> None:
        now = time.monotonic()
        if now - last.get(cause, -1e9) >= 5.0:  # one line per cause every few seconds
            last[cause] = now
            target.print(f"[yellow]waiting:[/yellow] {escape(message)}", soft_wrap=True, highlight=False)

    class Handler(logging.Handler):
        """The warehouse's waits become status lines; the API's come through ``on_wait``."""

        def emit(self, record: logging.LogRecord) -> None:
            if record.name.startswith("visibility.warehouse"):
                say(record.name, record.getMessage())

    handler = Handler(level=logging.WARNING)
    loggers = [logging.getLogger("visibility.warehouse"), logging.getLogger("visibility.api")]
    for logger in loggers:
        logger.addHandler(handler)
    previous = budget.on_wait
    budget.on_wait = lambda cause, seconds, message: say(cause, message)
    try:
        yield
    finally:
        budget.on_wait = previous
        for logger in loggers:
            logger.removeHandler(handler)


def check_warehouse(settings: Settings) -> None:
    """Prove the warehouse takes writes before the first request spends the API's rate budget."""
    from urllib.parse import urlsplit

    from resources.warehouse.base import WarehouseConfigError
    from resources.warehouse.resource import redact_url, warehouse_from_url

    try:
        with warehouse_from_url(settings.warehouse_url, settings.schema_name) as warehouse:
            warehouse.check_connection()
    except (ConfigError, WarehouseConfigError):
        raise  # already names the setting
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

    with warehouse_from_url(settings.warehouse_url, settings.schema_name) as warehouse, warehouse.session():
        return {name: row_count(warehouse, name) for name in ALL_TABLES}


def print_summary(summary: RunSummary, settings: Settings, start: dt.date, end: dt.date) -> None:
    """What landed, read back from the warehouse; on failure, what failed and what was kept."""
    where = f"{start} .. {end} (end exclusive) into {_redact(settings.warehouse_url)}"
    if summary.failures:
        title = (
            f"Sync FAILED for {where}: tables with a count in 'rows landed this run' were synced, "
            "every other table keeps the rows it had"
        )
    else:
        title = f"Landed {where}"
    table = Table(title=title)
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
    for step, message, code in summary.failures:
        err.print(f"[red]failed[/red] {step}: {escape(message)} (exit {code})")
    for step in summary.skipped:
        err.print(f"[yellow]skipped[/yellow] {step}: not run, because an earlier step of the sync failed")


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
    if summary.exit_code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
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
    check_warehouse(settings)
    landing = f"; the warehouse {_redact(settings.warehouse_url)} takes writes"
    if first is None:
        return (
            f"OK: {url} accepted the key and the subscription is active, but the key reaches no brand"
            + landing
        )
    return f"OK: {url} accepted the key; the subscription is active and brands are reachable" + landing


def cmd_check(args: argparse.Namespace) -> int:
    settings = load_settings()
    console.print(check(settings), markup=False)
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
    from sandbox.server import PortUnavailableError, serve_forever

    if not is_loopback(args.host):
        raise ConfigError(f"--host {args.host!r} is not a loopback address: the sandbox serves this machine")
    faults = FaultsConfig(profile=args.faults, seed=args.seed)
    try:
        serve_forever(SandboxConfig(seed=args.seed, size=args.size, faults=faults), args.host, args.port)
    except PortUnavailableError as exc:  # found before anything is printed
        raise ConfigError(str(exc)) from None
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


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)  # a stop from a supervisor is a Ctrl+C
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        err.print(
            "interrupted: the sync stopped; every table keeps its previous rows where its landing "
            "had not committed (re-run to complete)"
        )
        return EXIT_INTERRUPTED
    except Exception as exc:
        cause = _root_cause(exc)
        code = exit_code_for(cause)
        label = "configuration error" if code == EXIT_CONFIG else "error"
        err.print(f"[red]{label}:[/red] {escape(str(cause))}")
        return code


if __name__ == "__main__":
    sys.exit(main())
