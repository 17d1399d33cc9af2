"""The service's write endpoints as launchpad jobs, one op each, running the same code as the CLI
commands (:mod:`resources.api.write_operations`). Launching the job is the confirmation.

(No ``from __future__ import annotations`` here: Dagster reads the ops' ``Config`` annotations as classes.)
"""

import logging
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from dagster import (
    AssetMaterialization,
    Config,
    Failure,
    JobDefinition,
    MetadataValue,
    OpExecutionContext,
    Output,
    job,
    op,
)
from pydantic import AfterValidator, Field

from assets.audits import AuditLandingConfig, audit_reports, upsert_audit
from resources.api import write_operations
from resources.api.client import VisibilityClient
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.resource import WarehouseResource
from sync.tables import AUDIT_REPORTS

AUDIT_URL_JOB = "audit_url"
UNTRACK_COMPETITOR_JOB = "untrack_competitor"
CREATE_TOPIC_JOB = "create_topic"
RENAME_TOPIC_JOB = "rename_topic"
#: Run tag of every operation job, so the run list filters them apart from syncs.
OPERATION_TAGS = {"visibility/kind": "operation"}
#: The ops' progress lines also go to this logger, so the command line can print them as they happen.
PROGRESS_LOGGER = "visibility.operations"

_progress = logging.getLogger(PROGRESS_LOGGER)


def op_name(job_name: str) -> str:
    """The one op of an operation job: where its run config goes (``ops: {<op>: {config: ...}}``)."""
    return f"{job_name}_op"


#: A topic name, refused when blank (the same check as the command line's).
TopicName = Annotated[str, AfterValidator(write_operations.validate_topic_name)]
_BRAND_FIELD = "Brand id, or its exact name (case-insensitive), among the brands the key reaches."


class AuditUrlConfig(Config):
    """One URL to audit now."""

    brand: str = Field(description=_BRAND_FIELD)
    url: Annotated[str, AfterValidator(write_operations.validate_audit_url)] = Field(
        description="Absolute http(s) URL of the page to audit."
    )
    wait: bool = Field(default=True, description="Poll until the report is complete (else land it pending).")
    timeout_seconds: float = Field(
        default=write_operations.DEFAULT_AUDIT_TIMEOUT_SECONDS,
        gt=0,
        le=write_operations.MAX_AUDIT_TIMEOUT_SECONDS,
        description="Longest wait for the report; past it the run fails and the audit stays pending.",
    )
    poll_interval_seconds: float = Field(
        default=write_operations.DEFAULT_POLL_INTERVAL_SECONDS,
        gt=0,
        le=write_operations.MAX_POLL_INTERVAL_SECONDS,
        description="Seconds between two polls.",
    )


class UntrackCompetitorConfig(Config):
    """One tracked competitor to untrack (its mentions are kept)."""

    brand: str = Field(description=_BRAND_FIELD)
    competitor: str = Field(description="Tracked competitor's id, or its exact name (case-insensitive).")


class CreateTopicConfig(Config):
    """A topic to create; none is created when the brand already has one so named."""

    brand: str = Field(description=_BRAND_FIELD)
    name: TopicName = Field(description="Name of the new topic.")


class RenameTopicConfig(Config):
    """A topic to rename; prompts filed under it are unaffected."""

    brand: str = Field(description=_BRAND_FIELD)
    topic: str = Field(description="Topic id, or its current exact name (case-insensitive).")
    new_name: TopicName = Field(description="The topic's new name.")


def _metadata(values: write_operations.Metadata) -> dict[str, Any]:
    """Dagster metadata from an outcome's plain values (unset ones left out, URLs clickable)."""
    return {
        key: MetadataValue.url(value) if key == "url" and isinstance(value, str) else value
        for key, value in values.items()
        if value is not None
    }


def _landed(
    context: OpExecutionContext, warehouse: WarehouseResource, outcome: write_operations.AuditOutcome
) -> AssetMaterialization:
    """Upsert the audit's row in ``audit_reports`` as the audit sensor's landing does."""
    config = AuditLandingConfig(
        audit_id=outcome.audit_id,
        brand_id=outcome.brand.id,
        url=outcome.url,
        status="complete" if outcome.complete else "pending",
        poll=outcome.poll,
        requested_at=outcome.requested_at.isoformat(),
        completed_at=outcome.completed_at.isoformat() if outcome.complete and outcome.completed_at else None,
        report_json=outcome.report_json() if outcome.complete else None,
    )
    try:
        with warehouse.get_warehouse() as wh:
            written = upsert_audit(wh, config, context.run_id)
    except Exception as exc:
        raise RuntimeError(
            f"audit {outcome.audit_id} of {outcome.url} is {outcome.status} on the service, but landing it "
            f"in audit_reports failed ({type(exc).__name__}); do not request it again: "
            f"its report is at {outcome.poll}"
        ) from exc
    context.log.info(f"{outcome.describe()}; landed in audit_reports (rows written: {written})")
    return AssetMaterialization(
        asset_key=audit_reports.key,
        description=f"one-off audit ({AUDIT_URL_JOB} job)",
        metadata={**_metadata(outcome.metadata()), "rows_landed": written},
    )


@op(
    name="audit_url_op",
    description="Requests an audit of one URL for a brand (POST /v1/audit-reports), polls it to the "
    "finished report and lands it in audit_reports. An audit spends the workspace's audit budget.",
    tags=OPERATION_TAGS,
)
def audit_url_op(
    context: OpExecutionContext,
    config: AuditUrlConfig,
    api: VisibilityAPIResource,
    warehouse: WarehouseResource,
) -> Iterator[AssetMaterialization | Output[write_operations.AuditOutcome]]:
    with api.get_client() as client:
        plan = write_operations.plan_audit(
            client,
            config.brand,
            config.url,
            wait=config.wait,
            timeout_seconds=config.timeout_seconds,
            poll_interval_seconds=config.poll_interval_seconds,
        )
        context.log.info(f"about to {plan.describe()}")
        with warehouse.get_warehouse() as wh:  # the audit is charged: prove the landing works first
            wh.ensure_table(AUDIT_REPORTS)
        outcome = write_operations.submit_audit(client, plan)
        yield _landed(context, warehouse, outcome)
        if plan.wait:
            waiting = (
                f"audit {outcome.audit_id} requested and landed as pending; waiting up to "
                f"{plan.timeout_seconds:g}s for its report ({outcome.poll})"
            )
            context.log.info(waiting)
            _progress.info(waiting)  # the command line prints it as it happens
            try:
                outcome = write_operations.await_audit(client, outcome, plan)
            except write_operations.AuditStillPendingError as exc:
                metadata = _metadata(exc.outcome.metadata())
                raise Failure(description=f"{exc}; landed as pending", metadata=metadata) from exc
            yield _landed(context, warehouse, outcome)
    yield Output(outcome, metadata=_metadata(outcome.metadata()))


def _operation_job(
    name: str,
    config_type: type[Config],
    plan_with: Callable[[VisibilityClient, Any], write_operations.Plan],
    change: Callable[[VisibilityClient, Any], write_operations.Outcome],
    *,
    op_description: str,
    job_description: str,
) -> JobDefinition:
    """A job of one op that resolves the plan from its config, logs it, makes the change and reports
    the outcome in the log and the output's metadata."""

    @op(name=op_name(name), description=op_description, tags=OPERATION_TAGS)
    def operation(context: OpExecutionContext, config: config_type, api: VisibilityAPIResource) -> Output:
        with api.get_client() as client:
            plan = plan_with(client, config)
            context.log.info(f"about to {plan.describe()}" if plan.changes else plan.describe())
            outcome = change(client, plan)
        context.log.info(outcome.describe())
        return Output(outcome, metadata=_metadata(outcome.metadata()))

    @job(name=name, description=job_description, tags=OPERATION_TAGS)
    def operation_job() -> None:
        operation()

    return operation_job


@job(
    name=AUDIT_URL_JOB,
    description="Audit one URL now: request it, wait for the report, land it in audit_reports. "
    "Costs one audit of the workspace's budget.",
    tags=OPERATION_TAGS,
)
def audit_url_job() -> None:
    audit_url_op()


untrack_competitor_job = _operation_job(
    UNTRACK_COMPETITOR_JOB,
    UntrackCompetitorConfig,
    lambda client, config: write_operations.plan_untrack(client, config.brand, config.competitor),
    write_operations.untrack_competitor,
    op_description="Untracks a competitor of a brand (DELETE /v1/brands/{id}/tracked-competitors/"
    "{competitorId}): it leaves share of voice and competitor trends; its mentions are kept. The next "
    "sync marks its tracked_competitors row is_current = false.",
    job_description="Untrack one competitor of a brand (mentions are kept).",
)
create_topic_job = _operation_job(
    CREATE_TOPIC_JOB,
    CreateTopicConfig,
    lambda client, config: write_operations.plan_create_topic(client, config.brand, config.name),
    write_operations.create_topic,
    op_description="Creates a topic for a brand (POST /v1/brands/{id}/topics), unless the brand "
    "already has one so named; the next sync lands it in topics.",
    job_description="Create a topic for a brand.",
)
rename_topic_job = _operation_job(
    RENAME_TOPIC_JOB,
    RenameTopicConfig,
    lambda client, config: write_operations.plan_rename_topic(
        client, config.brand, config.topic, config.new_name
    ),
    write_operations.rename_topic,
    op_description="Renames a topic of a brand (PATCH /v1/brands/{id}/topics/{topicId}); prompts filed "
    "under it are unaffected; the next sync lands the new name in topics.",
    job_description="Rename a topic of a brand.",
)
operation_jobs = [audit_url_job, untrack_competitor_job, create_topic_job, rename_topic_job]
