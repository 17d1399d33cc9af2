"""The visual report as an asset (``visibility_report``), in its own group and job so a sync never
loads matplotlib; ``pipelines/report_sensor.py`` runs it after each successful sync. Each run
replaces one PNG (:func:`report_folder`); earlier ones stay in the materializations' metadata.
"""

from pathlib import Path

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    Config,
    DagsterInstance,
    Failure,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)
from pydantic import Field

from report import DEFAULT_DAYS, MAX_DAYS
from report.data import REQUIRED_TABLES, ReportDataMissing, load_report_data
from report.files import write_report
from report.render import png_data_uri, render_png
from resources.warehouse.resource import WarehouseResource
from resources.warehouse.urls import duckdb_path

REPORT_ASSET = "visibility_report"
REPORT_GROUP = "visibility_report"
REPORT_JOB = "visibility_report"
REPORT_FILE = "visibility_report.png"
#: The copy embedded in the metadata, 1200 px wide: every materialization's metadata stays in the event log.
METADATA_DPI = 60


class ReportConfig(Config):
    days: int = Field(
        default=DEFAULT_DAYS,
        ge=1,
        le=MAX_DAYS,
        description="Days the report covers, ending at the newest landed day.",
    )


def report_folder(warehouse: WarehouseResource, instance: DagsterInstance) -> Path:
    """``reports/`` next to a DuckDB file; the instance's storage folder for other warehouses."""
    if warehouse.url.strip().lower().startswith("duckdb:"):
        return duckdb_path(warehouse.url.strip()).parent / "reports"
    return Path(instance.storage_directory()) / REPORT_ASSET


#: A multi-asset only to name its op apart from the job (Dagster refuses both named alike).
@multi_asset(
    name="draw_visibility_report",
    specs=[
        AssetSpec(
            REPORT_ASSET,
            group_name=REPORT_GROUP,
            deps=[AssetKey(table) for table in REQUIRED_TABLES],
            description="Share of voice over time of each brand and its tracked competitors, visibility "
            "by engine, and the most-cited pages with their change. **To see it:** the *Metadata* "
            "table below, row `report`, *[Show Markdown]*. Refreshed after each run that lands the "
            "daily tables, once per backfill (sensor `visibility_report_after_sync`).",
            kinds={"matplotlib"},
        )
    ],
)
def visibility_report(
    context: AssetExecutionContext, config: ReportConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    try:
        with warehouse.get_warehouse() as wh:
            data = load_report_data(wh, days=config.days)
    except ReportDataMissing as exc:
        raise Failure(description=str(exc)) from None
    png = render_png(data)
    path = report_folder(warehouse, context.instance) / REPORT_FILE
    write_report(path, data, png)
    context.log.info(f"report of {len(data.sections)} brand(s), {data.start}..{data.last_day}: {path}")
    preview = render_png(data, dpi=METADATA_DPI)
    return MaterializeResult(
        metadata={
            "report": MetadataValue.md(f"![visibility report]({png_data_uri(preview)})"),
            "path": MetadataValue.path(str(path.resolve())),
            "first_day": MetadataValue.text(data.start.isoformat()),
            "last_day": MetadataValue.text(data.last_day.isoformat()),
            "brands": MetadataValue.int(len(data.sections)),
            "brands_left_out": MetadataValue.int(data.brands_left_out),
            "png_bytes": MetadataValue.int(len(png)),
        }
    )


report_assets = [visibility_report]
