"""``visibility-sync``: run, demo, check, sandbox (DESIGN.md's command line), report, and the write
commands of ``pipelines/cli_operations.py``.

Exit codes: ``pipelines/cli_output.py``, the kind of the failure (``resources/failures.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import shlex
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.markup import escape  # server texts ("[endpoint ...]") are not markup
from rich.table import Column, Table

from pipelines.cli_operations import add_operation_commands
from pipelines.cli_output import EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, console, err, printing_log
from pipelines.cli_setup import (
    check_warehouse,
    command_instance,
    dagster_home_full,
    event_log_writes_unprinted,
)
from report import DEFAULT_DAYS, MAX_DAYS
from resources.api.config import is_loopback_host
from resources.failures import FailureKind, classified_error, failure_kind, failure_kind_by_name
from resources.warehouse.urls import redact_url
from settings import ConfigError, Settings, load_settings, sync_window

if TYPE_CHECKING:  # imported inside the functions that use them: the command starts light
    from pipelines.cli_progress import SyncProgress
    from resources.api.budget import RequestBudget
    from sync.head_start import Selection

DEMO_DAYS = 14
CHECK_DEADLINE_SECONDS = 3.0
DEFAULT_REPORT = Path("data/reports/visibility_report.html")


# ---------------------------------------------------------------------------------------------
# run


@dataclass
class RunSummary:
    """What a sync landed, per asset, and what failed."""

    rows: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    out_of_scope: set[str] = field(default_factory=set)
    failures: list[tuple[str, str, FailureKind]] = field(default_factory=list)  # (asset/run, message, kind)
    skipped: list[str] = field(default_factory=list)  # steps not run because an earlier one failed

    @property
    def stops(self) -> bool:
        """A failure that later runs would only repeat (``FailureKind.stops_the_sync``)."""
        return any(kind.stops_the_sync for _, _, kind in self.failures)

    @property
    def exit_code(self) -> int:
        if self.failures:
            return max(kind.exit_code for _, _, kind in self.failures)
        return EXIT_PARTIAL if self.out_of_scope else EXIT_OK


def _parse_date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date YYYY-MM-DD: {value!r}") from None


def _collect(result: Any, summary: RunSummary, label: str) -> None:
    """Rows and requests from the run's materializations; failures with their kinds.

    A single-run range emits one event per partition with the same metadata, so within a run each
    asset counts once (the max); a sync split into several runs (non-adjacent engines) adds them up.
    """
    rows: dict[str, int] = {}
    requests: dict[str, int] = {}
    for event in result.all_events:
        if event.event_type_value == "ASSET_MATERIALIZATION":
            mat = event.event_specific_data.materialization
            name = mat.asset_key.to_user_string()
            # what sync.driver.landed_metadata wrote; a materialization without it counts nothing
            meta = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
            rows[name] = max(rows.get(name, 0), int(meta.get("rows_landed") or 0))
            requests[name] = max(requests.get(name, 0), int(meta.get("requests_total") or 0))
            summary.out_of_scope.update(meta.get("brands_out_of_scope") or ())
    summary.rows.update(rows)
    summary.requests.update(requests)
    if result.success:
        return
    started = {e.step_key for e in result.all_events if e.event_type_value == "STEP_START"}
    # Dagster records nothing for a step whose upstream step failed: it simply never starts
    summary.skipped.extend(
        f"{label}: {node.name}" for node in result.job_def.nodes if node.name not in started
    )
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            chain = _error_chain(getattr(event.event_specific_data, "error", None))
            message = _innermost_message(chain[-1]) if chain else "step failed"
            kind = failure_kind_by_name([error.cls_name or "" for error in chain])
            summary.failures.append((f"{label}: {event.step_key}", message, kind))
    if not summary.failures:
        summary.failures.append((label, "run failed", FailureKind.FAILED))


def _error_chain(error: Any) -> list[Any]:
    """A serialized step error and its causes, outermost first. Dagster wraps what an op raised
    ("Error occurred while executing op ..."); the API error inside says what went wrong."""
    chain: list[Any] = []
    while error is not None and all(error is not seen for seen in chain):
        chain.append(error)
        error = error.cause or getattr(error, "context", None)
    return chain


def _innermost_message(error: Any) -> str:
    """The message of the innermost error, its module path shortened to the class name."""
    text = (error.message or "").strip() or "step failed"
    qualified, sep, rest = text.partition(": ")
    if sep and qualified.endswith(error.cls_name or "\0"):
        return f"{error.cls_name}: {rest}"
    return text


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
    """Run the ``visibility_sync`` job over ``[start, end)`` x engines in this process, as the daily
    schedule does. Engines that are not one contiguous range take one run per range (the others re-run
    ``visibility_daily``), sharing one budget and one ``sync_session`` (listings; the head start, which
    fetches the first run's date x engine tables while Dagster loads). Dagster stores no secret."""
    from pipelines.cli_progress import sync_progress  # bars on a terminal, else lines on stderr
    from resources.api.endpoints import ENGINES_WITH_ALL, engine_groups
    from sync.catalog import DAILY
    from sync.discovery import BRANDS_TAG, SYNC_TAG
    from sync.head_start import HeadStart, SyncSession
    from sync.progress import NO_PROGRESS
    from sync.resume import resume_root

    api = settings.api_access()  # one request budget for every run of the sync
    base_tags = {SYNC_TAG: uuid.uuid4().hex, "visibility/launched_by": "visibility-sync"}
    if brands:
        base_tags[BRANDS_TAG] = ",".join(brands)
    last = end - dt.timedelta(days=1)
    recorded = bool(os.environ.get("DAGSTER_HOME"))  # runs recorded where the UI shows them
    spans = engine_groups(engines, ENGINES_WITH_ALL)
    session = SyncSession()  # the runs' listings, and the head start's fetches
    summary = RunSummary()
    with (
        sync_progress(show_progress, console, err) as bar,
        _status_lines(api.get_budget(), bar),
        ExitStack() as ahead,
    ):
        progress = bar.on_fetch if bar is not None else NO_PROGRESS

        def start_fetching(journals: str | None) -> None:
            """The first run's date x engine tables, fetched while Dagster still imports and plans."""
            selection = first_run_selection(start, end, spans[0], base_tags, resume_root(journals), settings)
            fetches = HeadStart(DAILY, selection, api, session.discovery, progress)
            session.head_start = ahead.enter_context(closing(fetches.start()))

        if not recorded:  # an ephemeral instance journals in the temp folder: known before Dagster is
            start_fetching(None)

        from pipelines.orphans import fail_orphaned_runs
        from pipelines.resources import api_resource, process_resources
        from pipelines.schedules import sync_runs
        from pipelines.syncs import sync_definitions

        definitions = sync_definitions(settings)
        with command_instance() as instance:
            if recorded:
                fail_orphaned_runs(instance, lambda line: err.print(f"[yellow]note:[/yellow] {escape(line)}"))
                start_fetching(instance.storage_directory())
            resource = api_resource(settings)
            resource.share_budget(api.get_budget())  # the runs' clients and the head start's: one budget
            resources = process_resources(settings, resource, progress, session)
            for (first, final), (job_name, range_) in zip(spans, sync_runs(start, last, spans), strict=True):
                job = definitions.resolve_job_def(job_name)
                result = _execute(job, instance, recorded, bar, {**base_tags, **range_}, resources, verbose)
                _collect(result, summary, f"{job_name} {first}..{final}")
                if summary.stops or api.get_budget().cancelled:
                    break
        if bar is not None:
            bar.finish("failed" if summary.failures else "done")
    return summary


def _execute(
    job: Any,
    instance: Any,
    recorded: bool,
    bar: SyncProgress | None,
    tags: dict[str, str],
    resources: dict[str, Any],
    verbose: bool,
) -> Any:
    """One run of the sync in this process. A ``recorded`` one (``DAGSTER_HOME`` set) is a run of the
    code location, tagged with this process for whoever finds it killed, and ended as canceled by a
    Ctrl+C or SIGTERM."""
    from assets.dagster_tags import MAX_RETRIES_TAG
    from pipelines.orphans import adopt_when_stored, cancel_interrupted, process_tags

    run_id = str(uuid.uuid4())
    log_level = "INFO" if verbose else "CRITICAL"  # step failures log at ERROR with stack traces
    if recorded:
        # a killed command is re-run by its user, not the daemon
        tags = {**tags, **process_tags(run_id), MAX_RETRIES_TAG: "0"}
        adopt_when_stored(instance, run_id)
    if bar is not None:  # steps starting and tables landing, as they happen
        bar.stage(f"starting job {job.name}")
        instance.add_event_listener(run_id, bar.on_dagster_event)
    try:
        return job.execute_in_process(
            instance=instance,
            run_id=run_id,
            tags=tags,
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
            resources=resources,
            raise_on_error=False,
        )
    except KeyboardInterrupt:
        if recorded:
            cancel_interrupted(instance, run_id)
        raise


def first_run_selection(
    start: dt.date,
    end: dt.date,
    span: tuple[str, str],
    tags: dict[str, str],
    journals: Path,
    settings: Settings,
) -> Selection:
    """What the first run of a command-line sync will be asked for, known before Dagster is imported:
    its dates x engines (``span``: the first of :func:`engine_groups`), brands, journal root and the
    settings' citation targets (which the ``api`` resource of its runs holds)."""
    from resources.api.endpoints import ENGINES_WITH_ALL
    from sync.discovery import CitationTargets, brand_filter
    from sync.head_start import Selection

    first, final = (ENGINES_WITH_ALL.index(engine) for engine in span)
    days = [start + dt.timedelta(days=n) for n in range((end - start).days)]
    cells = frozenset((day, engine) for day in days for engine in ENGINES_WITH_ALL[first : final + 1])
    targets = CitationTargets(tuple(settings.citation_urls), tuple(settings.citation_topics))
    return Selection(cells, brand_filter(tags), targets, journals)


@contextmanager
def _status_lines(budget: RequestBudget, bar: SyncProgress | None) -> Iterator[None]:
    """Say what the sync waits for, as it waits. The budget tells ``on_wait`` of every waiting
    thread's wait (rate limit, Retry-After, backoff, an unreachable service): one line per cause every
    few seconds, as the budget logs them. The ``visibility.warehouse`` warnings (the DuckDB file lock)
    are spaced by their source: each is shown."""
    import time

    from resources.api.budget import ANNOUNCE_EVERY_SECONDS

    target = bar.console if bar is not None else err
    last: dict[str, float] = {}

    def say(message: str) -> None:
        target.print(f"[yellow]waiting:[/yellow] {escape(message)}", soft_wrap=True, highlight=False)

    def api_wait(cause: str, seconds: float, message: str) -> None:
        now = time.monotonic()
        if now - last.get(cause, -ANNOUNCE_EVERY_SECONDS) >= ANNOUNCE_EVERY_SECONDS:
            last[cause] = now
            say(message)

    budget.on_wait = api_wait  # the sync's own budget (``sync`` makes it): nothing to give back
    with printing_log("visibility.warehouse", logging.WARNING, lambda record: say(record.getMessage())):
        yield


def print_summary(summary: RunSummary, settings: Settings, start: dt.date, end: dt.date) -> None:
    """What landed, read back from the warehouse; on failure, what failed and what was kept."""
    from resources.warehouse.queries import row_count
    from resources.warehouse.urls import warehouse_from_url
    from sync.catalog import ALL_TABLES

    where = f"{start} .. {end} (end exclusive) into {redact_url(settings.warehouse_url)}"
    if summary.failures:
        title = (
            f"Sync FAILED for {where}: tables with a count in 'rows landed this run' were synced, "
            "every other table keeps the rows it had"
        )
    else:
        title = f"Landed {where}"
    right = ("rows landed this run", "rows in table", "API requests")
    table = Table("table", *(Column(header, justify="right") for header in right), title=title)
    try:  # rows per landed table (None: table absent)
        warehouse = warehouse_from_url(settings.warehouse_url, settings.schema_name)
        with warehouse, warehouse.session():
            counts = {name: row_count(warehouse, name) for name in ALL_TABLES}
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
    if table.row_count:
        console.print(table)
    else:  # an empty table reads as a result; the error below is the news
        outcome = "Sync FAILED" if summary.failures else "Nothing landed"
        console.print(f"{outcome} for {where}: no table was written")
    for brand in sorted(summary.out_of_scope):
        err.print(
            f"[yellow]warning:[/yellow] brand {brand} is out of this key's scope (404): "
            "skipped, its rows untouched"
        )
    for step, message, kind in summary.failures:
        err.print(f"[red]failed[/red] {step}: {escape(message)} (exit {kind.exit_code})")
    for step in summary.skipped:
        err.print(f"[yellow]skipped[/yellow] {step}: not run, because an earlier step of the sync failed")


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def brand_ids(settings: Settings, refs: Sequence[str]) -> list[str]:
    """``--brand`` values as brand ids, like the write commands take them: an id as given (a brand
    out of the key's scope is then reported by the sync), a name resolved among the brands the key
    reaches (one ``GET /v1/brands`` for them all; an unknown or ambiguous name stops the run before it)."""
    wanted = [ref.strip() for ref in refs]
    names = [ref for ref in wanted if not _UUID.fullmatch(ref)]
    if not names:
        return wanted
    from resources.api.write_operations import resolve_brands

    with settings.api_access().get_client() as client:
        ids = {name: brand.id for name, brand in zip(names, resolve_brands(client, names), strict=True)}
    return [ids.get(ref, ref) for ref in wanted]


def cmd_run(args: argparse.Namespace) -> int:
    from resources.api.endpoints import ENGINES_WITH_ALL

    settings = load_settings()
    settings.require_api()
    today = dt.datetime.now(dt.UTC).date()
    end = args.end or today
    if args.start is not None:
        start = args.start
    elif window := sync_window(today, settings.lookback_days, settings.start_date):
        start = window[0]  # the daily schedule's window: yesterday and the lookback, from the first day
    else:
        raise ConfigError(f"no partition yet: VISIBILITY_START_DATE {settings.start_date} is today or later")
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
    check_warehouse(settings)
    brands = brand_ids(settings, args.brand or ())
    engines = args.engine or ENGINES_WITH_ALL
    summary = sync(settings, start, end, engines, brands, show_progress=not args.quiet, verbose=args.verbose)
    if summary.exit_code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    print_summary(summary, settings, start, end)
    return summary.exit_code


# ---------------------------------------------------------------------------------------------
# check


def cmd_check(args: argparse.Namespace) -> int:
    """One ``GET /v1/brands`` (first page only); the typed error it raises says what is wrong."""
    settings = load_settings()
    # a check answers quickly: a few seconds of retries, not a sync's patience, unless the user set
    # VISIBILITY_RETRY_DEADLINE_SECONDS: then that deadline holds for the check too
    chosen = "retry_deadline_seconds" in settings.model_fields_set
    deadline = settings.retry_deadline_seconds if chosen else CHECK_DEADLINE_SECONDS
    access = settings.api_access().model_copy(
        update={"timeout_seconds": min(10.0, deadline), "retry_deadline_seconds": deadline}
    )
    with access.get_client() as client:
        first = next(iter(client.list_brands()), None)
    check_warehouse(settings)
    if first is None:
        reached = "accepted the key and the subscription is active, but the key reaches no brand"
    else:
        reached = "accepted the key; the subscription is active and brands are reachable"
    landing = f"the warehouse {redact_url(settings.warehouse_url)} takes writes"
    console.print(f"OK: {access.api_url} {reached}; {landing}", markup=False)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# report


def cmd_report(args: argparse.Namespace) -> int:
    """The visual report of the configured warehouse, as HTML or PNG (``report/``, loaded here)."""
    from report.data import ReportDataMissing, load_report_data
    from report.files import is_report_path, write_report
    from resources.warehouse.urls import warehouse_from_url

    output: Path = args.output
    if not is_report_path(output):
        raise ConfigError(f"--output {output} must end in .html or .png")
    if not 1 <= args.days <= MAX_DAYS:
        raise ConfigError(f"--days must be between 1 and {MAX_DAYS}, got {args.days}")
    settings = load_settings()
    try:
        with warehouse_from_url(settings.warehouse_url, settings.schema_name) as warehouse:
            data = load_report_data(warehouse, days=args.days)
    except ReportDataMissing as exc:
        raise ConfigError(f"VISIBILITY_WAREHOUSE {redact_url(settings.warehouse_url)}: {exc}") from None
    size = write_report(output, data)
    console.print(
        f"Wrote the report of {len(data.sections)} brand(s), {data.start} .. {data.last_day}, "
        f"to {output} ({size // 1024} KB)",
        markup=False,
        soft_wrap=True,
    )
    if data.brands_left_out:
        console.print(f"{data.brands_left_out} more brand(s) not shown", markup=False)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# demo and sandbox


PROJECT_ROOT = Path(__file__).resolve().parents[1]  # workspace.yaml and dagster.yaml, in a checkout
HINT_TABLE = "prompt_mentions"
HINT_SQL = "SELECT engine, count(*) AS mentions FROM {table} GROUP BY engine ORDER BY engine"
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _shell_path(path: Path, cwd: Path | None = None) -> str:
    """A path as a user types it here: relative to the working directory when under it."""
    cwd = cwd or Path.cwd()
    try:
        shown = str(path.relative_to(cwd))
    except ValueError:
        shown = str(path)
    return shlex.quote(shown)


def _tool(name: str) -> Path:
    """This environment's own program (``.venv/bin/dagster``), so a printed command runs as printed;
    the bare name (found on PATH) when the environment has none."""
    sibling = Path(sys.executable).with_name(name)
    return sibling if sibling.exists() else Path(name)


def _sql_name(*parts: str) -> str:
    return ".".join(p if _PLAIN_NAME.match(p) else '"' + p.replace('"', '""') + '"' for p in parts)


def _without_password(url: str) -> str:
    """A Postgres URL for libpq without its password (libpq then reads PGPASSWORD or ~/.pgpass)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    user = f"{parts.username}@" if parts.username else ""
    return parts._replace(scheme="postgresql", netloc=user + host).geturl()


def query_hint(settings: Settings) -> str:
    """How to read the landed rows back, for the warehouse in use: a command that runs as printed
    (this environment's Python and its drivers), with no password in it."""
    from pipelines.downstream import duckdb_catalog
    from resources.warehouse.urls import (
        POSTGRES_SCHEMES,
        bigquery_target,
        duckdb_path,
        redact_url,
        url_scheme,
    )

    url, schema = settings.warehouse_url, settings.schema_name
    python = _shell_path(Path(sys.executable))
    scheme = url_scheme(url)
    note = ""
    if scheme == "duckdb":
        path = duckdb_path(url)
        sql = HINT_SQL.format(table=_sql_name(duckdb_catalog(settings), schema, HINT_TABLE))
        code = (
            f"import duckdb; duckdb.connect({json.dumps(str(path))}, read_only=True)"
            f".sql({json.dumps(sql)}).show()"
        )
        where = f"DuckDB file {path}, opened read-only so that other readers can share it"
    elif scheme in POSTGRES_SCHEMES:
        target = _without_password(url)
        sql = HINT_SQL.format(table=_sql_name(schema, HINT_TABLE))
        code = (
            f"import psycopg; [print(*row) for row in psycopg.connect({json.dumps(target)})"
            f".execute({json.dumps(sql)})]"
        )
        where = f"Postgres {target}, schema {schema}"
        if redact_url(url) != url:  # a password (an unparseable URL counts as holding one)
            note = "\n  (the password is not printed: psycopg reads it from PGPASSWORD or ~/.pgpass)"
    else:
        project, dataset = bigquery_target(url)
        sql = HINT_SQL.format(table=f"`{project}.{dataset}.{HINT_TABLE}`")
        code = (
            f"from google.cloud import bigquery; [print(*row) for row in bigquery.Client("
            f"project={json.dumps(project)}).query({json.dumps(sql)}).result()]"
        )
        where = f"BigQuery dataset {project}.{dataset} (Application Default Credentials)"
    return f"Query it ({where}):\n  {python} -c {shlex.quote(code)}{note}"


def dagster_hint(cwd: Path | None = None) -> str:
    """Where the demo's runs can be seen: the Dagster UI when ``DAGSTER_HOME`` recorded them, else
    how to record them."""
    home = os.environ.get("DAGSTER_HOME")
    workspace = PROJECT_ROOT / "workspace.yaml"
    dagster = _shell_path(_tool("dagster"), cwd)
    ui = f"{dagster} dev -w {_shell_path(workspace, cwd)}" if workspace.exists() else f"{dagster} dev"
    if home:
        return (
            f"Recorded in Dagster (DAGSTER_HOME={home}): the runs of visibility_sync and each table's "
            f"materializations show in the UI. Open it with\n  {ui}    # http://127.0.0.1:3000"
        )
    again = _shell_path(_tool("visibility-sync"), cwd)
    if (PROJECT_ROOT / "dagster.yaml").exists():  # in a checkout: its instance settings, as they are
        export = f"export DAGSTER_HOME={shlex.quote(str(PROJECT_ROOT))}"
    else:
        export = "export DAGSTER_HOME=$PWD/.dagster_home && mkdir -p $DAGSTER_HOME"
    return (
        "Not recorded for the Dagster UI: DAGSTER_HOME is not set (the runs used an ephemeral instance). "
        "To see them there:\n"
        f"  {export}\n"
        f"  {again} demo && {ui}    # http://127.0.0.1:3000"
    )


def cmd_demo(args: argparse.Namespace) -> int:
    console.print("Starting the sandbox on loopback...")  # before the imports below: a second of them
    from resources.api.config import KEY_SETTING, URL_SETTING
    from resources.api.endpoints import ENGINES_WITH_ALL
    from sandbox.config import SandboxConfig
    from sandbox.testing import run_sandbox

    today = dt.datetime.now(dt.UTC).date()
    # the competitors the sandbox tracks "at start" have their history at once: the sync asks within
    # a second of the start, before the 2-second backfill those competitors otherwise go through
    config = SandboxConfig(seed=args.seed, today=today, backfill_delay_seconds=0.0)
    with run_sandbox(config) as sandbox:
        # the sandbox's URL and key win over the environment's; the warehouse is the environment's
        demo = {URL_SETTING: sandbox.url, KEY_SETTING: sandbox.keys["workspace"]}
        settings = load_settings(overrides=demo)
        start, end = today - dt.timedelta(days=args.days), today
        console.print(
            f"Sandbox ready at {sandbox.url}. Syncing {start} .. {end} (end exclusive), every engine and "
            f"the `all` rollup, into {redact_url(settings.warehouse_url)}",
            soft_wrap=True,
        )
        check_warehouse(settings)
        summary = sync(
            settings, start, end, ENGINES_WITH_ALL, show_progress=not args.quiet, verbose=args.verbose
        )
        print_summary(summary, settings, start, end)
    if summary.exit_code == EXIT_OK:
        console.print(f"Done. {query_hint(settings)}", soft_wrap=True, markup=False, highlight=False)
    console.print(dagster_hint(), soft_wrap=True, markup=False, highlight=False)
    return summary.exit_code


def cmd_sandbox(args: argparse.Namespace) -> int:
    from sandbox.__main__ import config_of
    from sandbox.server import PortUnavailableError, serve_forever

    if not is_loopback_host(args.host):
        raise ConfigError(f"--host {args.host!r} is not a loopback address: the sandbox serves this machine")
    try:
        serve_forever(config_of(args), args.host, args.port)
    except PortUnavailableError as exc:  # found before anything is printed
        raise ConfigError(str(exc)) from None
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# entry point


def package_version() -> str:
    """This install's version, from the package metadata (pyproject.toml's ``version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("visibility-sync")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def environment_help(leave_out: Sequence[str] = ()) -> str:
    """The variables a sync reads, listed from the settings model itself (names and defaults), and
    ``DAGSTER_HOME``, which the command reads."""
    defaults = load_settings(env={})  # every default, whatever this environment holds
    lines = ["environment (read before the first request; a bad value stops the command naming it):"]
    for name in Settings.model_fields:
        variable = Settings.variable(name)
        if variable in leave_out:
            continue
        default = getattr(defaults, name)
        lines.append(f"  {variable:<35} {'required' if default is None else f'default {default}'}")
    lines.append(f"  {'DAGSTER_HOME':<35} when set, the runs are recorded there and show in the Dagster UI")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    from resources.api.config import KEY_SETTING, URL_SETTING
    from resources.api.endpoints import ENGINES_WITH_ALL
    from sandbox.__main__ import add_arguments as add_sandbox_arguments

    parser = argparse.ArgumentParser(
        prog="visibility-sync",
        description="Land AI-search brand-visibility data in DuckDB, Postgres or BigQuery, through Dagster.",
        epilog="Exit codes: 0 ok, 1 failed or partial, 2 configuration error, 3 key refused "
        "(401/402/403), 4 service unavailable, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    shown = argparse.ArgumentParser(add_help=False)  # what a sync shows while it runs
    shown.add_argument("--quiet", action="store_true", help="no progress display")
    shown.add_argument("--verbose", action="store_true", help="Dagster's own log, stack traces included")

    run = sub.add_parser(
        "run",
        help="materialize every asset for a date range (default: yesterday + lookback)",
        description="Sync a date range into the warehouse: the visibility_sync job, in this process.",
        epilog=environment_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[shown],
    )
    run.add_argument("--start", type=_parse_date, help="first date, YYYY-MM-DD (inclusive)")
    run.add_argument("--end", type=_parse_date, help="end date, YYYY-MM-DD (exclusive)")
    run.add_argument(
        "--engine",
        action="append",
        choices=ENGINES_WITH_ALL,
        metavar="E",
        help="engine to sync (repeatable; `all` = rollup)",
    )
    run.add_argument(
        "--brand", action="append", metavar="BRAND", help="only this brand, by id or name (repeatable)"
    )
    run.set_defaults(handler=cmd_run)

    demo = sub.add_parser(
        "demo",
        help="start the sandbox, sync two weeks from it into VISIBILITY_WAREHOUSE (data/visibility.duckdb)",
        description="A first run: the local sandbox on loopback, then two weeks of it synced into the "
        "warehouse, showing each step; ends with a query to run and how to see the runs in the Dagster UI.",
        epilog=environment_help(leave_out=(URL_SETTING, KEY_SETTING))
        + "\n(the sandbox's URL and key replace VISIBILITY_API_URL and VISIBILITY_API_KEY)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[shown],
    )
    demo.add_argument("--days", type=int, default=DEMO_DAYS, help="days to sync (default 14)")
    demo.add_argument("--seed", type=int, default=7, help="the sandbox's world (default 7)")
    demo.set_defaults(handler=cmd_demo)

    chk = sub.add_parser("check", help="validate URL, key and subscription with one GET /v1/brands")
    chk.set_defaults(handler=cmd_check)

    sb = sub.add_parser("sandbox", help="serve the local sandbox and print its URL and demo key")
    add_sandbox_arguments(sb)  # python -m sandbox's
    sb.set_defaults(handler=cmd_sandbox)

    add_operation_commands(sub)
    report = sub.add_parser(
        "report", help="draw share of voice, visibility by engine and top cited pages (HTML or PNG)"
    )
    report.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_REPORT,
        metavar="PATH",
        help=f"file to write; .html (self-contained, PNG embedded) or .png (default {DEFAULT_REPORT})",
    )
    report.add_argument(
        "--days",
        type=int,
        default=DEFAULT_DAYS,
        help=f"days covered, ending at the newest landed day (default {DEFAULT_DAYS})",
    )
    report.set_defaults(handler=cmd_report)
    return parser


def _not_an_interrupt(record: logging.LogRecord) -> bool:
    """False for a record that carries a Ctrl+C (SQLAlchemy logs one while closing a connection, then
    re-raises it; :func:`main` reports the interruption in one line)."""
    return not (record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt))


def quiet_interrupts() -> None:
    """Keep Ctrl+C tracebacks out of the records no handler takes (written by logging's last resort)."""
    last_resort = logging.lastResort
    if last_resort is not None and _not_an_interrupt not in last_resort.filters:
        last_resort.addFilter(_not_an_interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    args = build_parser().parse_args(argv)
    quiet_interrupts()
    previous_sigterm = None
    if threading.current_thread() is threading.main_thread():
        # a stop from a supervisor is a Ctrl+C; a caller of main() (a test) gets its own back after
        previous_sigterm = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with nullcontext() if getattr(args, "verbose", False) else event_log_writes_unprinted():
            return int(args.handler(args))
    except KeyboardInterrupt:
        err.print(
            "interrupted: the sync stopped; every table keeps its previous rows where its landing "
            "had not committed (re-run to complete)"
        )
        return EXIT_INTERRUPTED
    except Exception as caught:
        exc = dagster_home_full(caught) or caught
        kind = failure_kind(exc)
        label = "configuration error" if kind is FailureKind.CONFIGURATION else "error"
        err.print(f"[red]{label}:[/red] {escape(str(classified_error(exc)))}")
        return kind.exit_code
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)


def console_main() -> NoReturn:
    """The ``visibility-sync`` command: :func:`main`, then an exit that skips the interpreter's
    teardown (garbage-collecting every object Dagster made serves nothing when the process ends);
    ``atexit`` handlers and the flush of stdout and stderr still run. pandas is kept out: no
    subcommand needs it, and pyarrow would import it on the first Arrow array of a sync."""
    import atexit

    from sync.without_pandas import keep_pandas_out

    keep_pandas_out("the visibility-sync command")
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()
