"""``visibility-sync audit | untrack-competitor | topic create | topic rename``: the service's write
endpoints from the command line.

Each command resolves names with read-only calls, prints the plan, asks ``Proceed? [y/N]`` (unless
``--yes``), then runs the operation's Dagster job (``pipelines/operation_jobs.py``) in this process.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from rich.markup import escape

from pipelines.cli_output import EXIT_OK, EXIT_PARTIAL, console, err, printing_log
from pipelines.cli_setup import check_warehouse, command_instance
from resources.api import write_operations
from resources.api.client import VisibilityClient
from settings import ConfigError, Settings, load_settings

PROMPT = "Proceed? [y/N] "


def confirmed(args: argparse.Namespace, plan: str) -> bool:
    """Show the plan; ``--yes`` or an answer of y/yes goes ahead, anything else (EOF too) does not."""
    console.print(f"About to {escape(write_operations.visible(plan))}.", soft_wrap=True)
    if args.yes:
        return True
    try:
        answer = input(PROMPT)
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def run_operation(settings: Settings, job_name: str, config: dict[str, Any]) -> Any:
    """Run one operation job in this process and return its op's outcome; an error is raised as the
    op raised it (the API's ``code`` and ``X-Request-Id`` included), for ``main``'s exit codes."""
    from dagster import Definitions

    from pipelines.operation_jobs import OPERATION_TAGS, PROGRESS_LOGGER, op_name, operation_jobs
    from pipelines.orphans import process_tags
    from pipelines.resources import build_resources

    definitions = Definitions(jobs=operation_jobs, resources=build_resources(settings))
    # a run recorded in DAGSTER_HOME names its process, for whoever finds it killed
    tags = {**OPERATION_TAGS, "visibility/launched_by": "visibility-sync", **process_tags()}
    run_config = {
        "ops": {op_name(job_name): {"config": config}},
        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},  # the progress lines say it
    }

    def show(record: logging.LogRecord) -> None:  # an audit's id and poll path while it waits
        console.print(escape(write_operations.visible(record.getMessage())), soft_wrap=True)

    with printing_log(PROGRESS_LOGGER, logging.INFO, show), command_instance() as instance:
        result = definitions.resolve_job_def(job_name).execute_in_process(
            run_config=run_config, instance=instance, tags=tags
        )
        return result.output_for_node(op_name(job_name))


def job_config(plan: write_operations.Plan) -> dict[str, Any]:
    """The operation job's config from a confirmed plan: its fields (a record by its id) are the
    job's, so the job resolves what the user confirmed; a field left unset is left out."""
    values = {field.name: getattr(plan, field.name) for field in fields(plan)}
    return {
        name: value.id if isinstance(value, write_operations.Named) else value
        for name, value in values.items()
        if value is not None
    }


def carry_out(
    args: argparse.Namespace,
    job_name: str,
    plan_with: Callable[[VisibilityClient], write_operations.Plan],
    *,
    note: str = "",
    lands: bool = False,
) -> int:
    """Refuse what cannot go ahead before any request, as a usage error (exit 2): the settings, a
    change nobody can confirm, a warehouse that takes no writes (given ``lands``), a malformed
    argument. Then confirm the plan, run the job and print the outcome."""
    settings = load_settings()
    settings.require_api()
    if not args.yes and not sys.stdin.isatty():
        command = " ".join(filter(None, (args.command, getattr(args, "action", None))))
        raise ConfigError(
            f"`visibility-sync {command}` changes the service and asks for confirmation, but stdin "
            "is not a terminal: pass --yes to run it unattended (nothing was sent)"
        )
    if lands:
        check_warehouse(settings)
    access = settings.api_access()
    with access.get_client() as client:  # resolves names; the job opens its own
        plan = plan_with(client)  # a malformed URL or an empty --brand: InvalidInputError, exit 2
    if not plan.changes:
        console.print(escape(write_operations.visible(plan.describe())), soft_wrap=True)
        return EXIT_OK
    if not confirmed(args, plan.describe()):
        err.print("cancelled: nothing was changed")
        return EXIT_PARTIAL
    outcome: write_operations.Outcome = run_operation(settings, job_name, job_config(plan))
    console.print(escape(write_operations.visible(outcome.describe() + note)), soft_wrap=True)
    return EXIT_OK if outcome.ok else EXIT_PARTIAL


# ---------------------------------------------------------------------------------------------
# commands


def cmd_audit(args: argparse.Namespace) -> int:
    def plan(client: VisibilityClient) -> write_operations.Plan:
        return write_operations.plan_audit(
            client,
            args.brand,
            args.url,
            wait=args.wait,
            timeout_seconds=args.timeout,
            poll_interval_seconds=args.poll_interval,
        )

    # lands: prove the warehouse takes writes before paying for the audit
    return carry_out(args, "audit_url", plan, note="; landed in audit_reports", lands=True)


def cmd_untrack_competitor(args: argparse.Namespace) -> int:
    return carry_out(
        args,
        "untrack_competitor",
        lambda client: write_operations.plan_untrack(client, args.brand, args.competitor),
    )


def cmd_topic_create(args: argparse.Namespace) -> int:
    return carry_out(
        args, "create_topic", lambda client: write_operations.plan_create_topic(client, args.brand, args.name)
    )


def cmd_topic_rename(args: argparse.Namespace) -> int:
    return carry_out(
        args,
        "rename_topic",
        lambda client: write_operations.plan_rename_topic(client, args.brand, args.topic, args.name),
    )


# ---------------------------------------------------------------------------------------------
# parser


def _seconds_up_to(most: float) -> Callable[[str], float]:
    """An argparse type: seconds in (0, ``most``], the bound the job's field has, so a flag the job
    would refuse is refused here, before any prompt or request (argparse names the flag; exit 2)."""

    def seconds(value: str) -> float:
        try:
            parsed = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
        if not 0 < parsed <= most:
            raise argparse.ArgumentTypeError(
                f"must be more than 0 and at most {most:g} seconds, got {value!r}"
            )
        return parsed

    return seconds


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--brand", required=True, metavar="B", help="brand id, or its exact name (case-insensitive)"
    )
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")


def add_operation_commands(sub: Any) -> None:
    """Register the commands on ``build_parser()``'s subparsers."""
    audit = sub.add_parser(
        "audit", help="audit one URL now for a brand, wait for the report and land it in audit_reports"
    )
    audit.add_argument("url", metavar="URL", help="absolute http(s) URL of the page to audit")
    _common(audit)
    audit.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="poll until the report is complete (default); --no-wait lands it pending and returns",
    )
    audit.add_argument(
        "--timeout",
        type=_seconds_up_to(write_operations.MAX_AUDIT_TIMEOUT_SECONDS),
        default=write_operations.DEFAULT_AUDIT_TIMEOUT_SECONDS,
        metavar="S",
        help="longest wait for the report (default 300, at most "
        f"{write_operations.MAX_AUDIT_TIMEOUT_SECONDS:g}); past it: exit 1, the audit stays pending",
    )
    audit.add_argument(
        "--poll-interval",
        type=_seconds_up_to(write_operations.MAX_POLL_INTERVAL_SECONDS),
        default=write_operations.DEFAULT_POLL_INTERVAL_SECONDS,
        metavar="S",
        help=f"seconds between two polls (default 2, at most {write_operations.MAX_POLL_INTERVAL_SECONDS:g})",
    )
    audit.set_defaults(handler=cmd_audit)

    untrack = sub.add_parser(
        "untrack-competitor", help="untrack a competitor of a brand (its mentions are kept)"
    )
    untrack.add_argument("competitor", metavar="COMPETITOR", help="tracked competitor's id or exact name")
    _common(untrack)
    untrack.set_defaults(handler=cmd_untrack_competitor)

    topic = sub.add_parser("topic", help="create or rename a topic of a brand")
    actions = topic.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a topic (nothing is created if one is so named)")
    create.add_argument("name", metavar="NAME", help="name of the new topic")
    _common(create)
    create.set_defaults(handler=cmd_topic_create)
    rename = actions.add_parser("rename", help="rename a topic (its prompts stay filed under it)")
    rename.add_argument("topic", metavar="TOPIC", help="topic id or its current exact name")
    rename.add_argument("name", metavar="NAME", help="the new name")
    _common(rename)
    rename.set_defaults(handler=cmd_topic_rename)
