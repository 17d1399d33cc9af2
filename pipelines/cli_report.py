"""``visibility-sync report``: the visual report of the configured warehouse, as HTML or PNG.
Nothing heavy at module level: the report package and matplotlib load when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipelines.cli_output import EXIT_OK, console
from report import DEFAULT_DAYS, MAX_DAYS
from settings import ConfigError, load_settings

DEFAULT_OUTPUT = Path("data/reports/visibility_report.html")


def add_report_parser(sub: argparse._SubParsersAction) -> None:
    """The ``report`` subcommand and its options."""
    parser = sub.add_parser(
        "report", help="draw share of voice, visibility by engine and top cited pages (HTML or PNG)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        metavar="PATH",
        help=f"file to write; .html (self-contained, PNG embedded) or .png (default {DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "--days",
        type=int,
        default=DEFAULT_DAYS,
        help=f"days covered, ending at the newest landed day (default {DEFAULT_DAYS})",
    )
    parser.set_defaults(handler=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from report.data import ReportDataMissing, load_report_data
    from report.files import is_report_path, write_report
    from resources.warehouse.urls import redact_url, warehouse_from_url

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
