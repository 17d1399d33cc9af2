"""The ``audit_reports`` asset: lands one audit's state, as the audit sensor decided it.

The run makes no API call (the audit is in its config), so a re-run lands the same row; a late
``pending`` never overwrites a final state.
"""

import datetime as dt
import json

import pyarrow as pa
from dagster import (
    AssetExecutionContext,
    Config,
    MaterializeResult,
    MetadataValue,
    asset,
    define_asset_job,
)

from assets.builders import WRITER_POOL
from resources.warehouse import queries
from resources.warehouse.base import Warehouse
from resources.warehouse.resource import WarehouseResource
from sync.tables import AUDIT_REPORTS

AUDIT_STATUSES = ("pending", "complete", "timed_out")
FINAL_STATUSES = frozenset({"complete", "timed_out"})
AUDIT_LANDING_JOB_NAME = "land_audit_report"

#: Run tags, so audits are findable in the UI's run list (filter by tag).
TAG_AUDIT_ID = "visibility/audit_id"
TAG_AUDIT_STATUS = "visibility/audit_status"
TAG_AUDIT_BRAND = "visibility/brand_id"


class AuditLandingConfig(Config):
    """One audit's state, as the sensor saw it (timestamps ISO 8601 UTC)."""

    audit_id: str
    brand_id: str
    url: str
    status: str
    poll: str
    requested_at: str
    completed_at: str | None = None
    timed_out_at: str | None = None
    #: The finished report's ``data`` object as JSON text (complete audits only).
    report_json: str | None = None


def _ts(value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def audit_row_table(config: AuditLandingConfig) -> pa.Table:
    """The one-row Arrow table of an audit, in the spec's schema."""
    if config.status not in AUDIT_STATUSES:
        raise ValueError(f"unknown audit status {config.status!r}; expected one of {AUDIT_STATUSES}")
    if config.report_json is not None:
        json.loads(config.report_json)  # refuse a malformed report before writing anything
    row = {**config.model_dump(), "id": config.audit_id, "report": config.report_json}
    for column in ("requested_at", "completed_at", "timed_out_at"):
        row[column] = _ts(row[column])
    schema = AUDIT_REPORTS.arrow_schema
    return pa.Table.from_pylist([{name: row.get(name) for name in schema.names}], schema=schema)


def upsert_audit(warehouse: Warehouse, config: AuditLandingConfig, run_id: str) -> int:
    """Upsert the audit's row (rows written); nothing when it is ``pending`` and a final state landed."""
    rows = audit_row_table(config)
    warehouse.ensure_table(AUDIT_REPORTS)
    if config.status == "pending" and queries.audit_status(warehouse, config.audit_id) in FINAL_STATUSES:
        return 0
    return warehouse.upsert_snapshot(AUDIT_REPORTS, rows, run_id, None).rows_written


@asset(
    name="audit_reports",
    description="URL audits requested by the audit sensor: pending, complete (with the report) or "
    "timed_out, with requested_at, completed_at and timed_out_at. One run per audit state change.",
    group_name="audits",
    pool=WRITER_POOL,
    tags={"visibility/kind": "audit"},
)
def audit_reports(
    context: AssetExecutionContext, config: AuditLandingConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    with warehouse.get_warehouse() as wh:
        written = upsert_audit(wh, config, context.run_id)
    if config.status == "pending" and not written:
        context.log.info(
            f"audit {config.audit_id}: its landed state is final; the pending state is not landed"
        )
    if config.status == "timed_out":
        context.log.warning(
            f"audit {config.audit_id} of {config.url} timed out: still not complete at {config.timed_out_at}"
        )
    ended = {"completed_at": config.completed_at, "timed_out_at": config.timed_out_at}
    return MaterializeResult(
        metadata={
            "audit_id": config.audit_id,
            "brand_id": config.brand_id,
            "url": MetadataValue.url(config.url),
            "status": config.status,
            "requested_at": config.requested_at,
            "rows_landed": written,
            **{name: value for name, value in ended.items() if value},
        }
    )


audit_landing_job = define_asset_job(
    AUDIT_LANDING_JOB_NAME,
    selection=[audit_reports],
    description="Lands one audit's state in audit_reports; launched by the audit sensor only.",
)

audit_assets = [audit_reports]
