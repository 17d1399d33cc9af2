"""Choosing the engine from configuration; the Postgres password never leaks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dagster import EnvVar

from resources.warehouse.contract import WarehouseConfigError
from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.postgres import PostgresWarehouse
from resources.warehouse.resource import WarehouseResource
from resources.warehouse.urls import redact_url, warehouse_from_url
from tests.warehouse.helpers import D1, D2, MENTIONS, mention_rows, scope

SECRET = "hunter2-s3cr3t"


def test_duckdb_urls_follow_sqlalchemy_slashes(tmp_path: Path) -> None:
    rel = warehouse_from_url("duckdb:///data/visibility.duckdb")
    assert isinstance(rel, DuckDBWarehouse) and rel.path == Path("data/visibility.duckdb").resolve()
    absolute = warehouse_from_url(f"duckdb:///{tmp_path}/x.duckdb", "other")
    assert isinstance(absolute, DuckDBWarehouse)
    assert (absolute.path, absolute.schema) == (tmp_path / "x.duckdb", "other")


@pytest.mark.parametrize(
    ("url", "schema", "setting"),
    [
        ("", "visibility", "VISIBILITY_WAREHOUSE"),
        ("duckdb://", "visibility", "VISIBILITY_WAREHOUSE"),
        ("duckdb:///:memory:", "visibility", "VISIBILITY_WAREHOUSE"),
        ("mysql://u@h/db", "visibility", "VISIBILITY_WAREHOUSE"),
        ("postgresql://u@h:5432/", "visibility", "VISIBILITY_WAREHOUSE"),
        ("bigquery://project", "visibility", "VISIBILITY_WAREHOUSE"),
        ("duckdb:///x.duckdb", "bad-name", "VISIBILITY_SCHEMA"),
        ("duckdb:///x.duckdb", "1abc", "VISIBILITY_SCHEMA"),
        ("postgresql://u@h:5432/db", "a" * 64, "VISIBILITY_SCHEMA"),
    ],
)
def test_bad_settings_are_refused_before_any_io_naming_the_setting(
    url: str, schema: str, setting: str
) -> None:
    with pytest.raises(WarehouseConfigError, match=setting):
        warehouse_from_url(url, schema)


@pytest.mark.parametrize(
    "url",
    [
        f"mysql://user:{SECRET}@host/db",
        f"postgresql://user:{SECRET}@host:notaport/db",
        f"postgresql://user:{SECRET}@host:5432/",
    ],
)
def test_password_never_appears_in_config_errors(url: str) -> None:
    with pytest.raises(WarehouseConfigError) as err:
        warehouse_from_url(url)
    chain = [err.value, err.value.__cause__, err.value.__context__]
    assert all(SECRET not in str(e) and SECRET not in repr(e) for e in chain if e is not None)


def test_password_never_appears_in_reprs_or_connection_errors() -> None:
    url = f"postgresql://user:{SECRET}@127.0.0.1:9/db"  # port 9 (discard): connection refused
    wh = warehouse_from_url(url)
    assert isinstance(wh, PostgresWarehouse)
    assert SECRET not in repr(wh) and "***" in repr(wh)
    resource = WarehouseResource(url=url)
    assert SECRET not in repr(resource) and SECRET not in str(resource)
    with pytest.raises(Exception) as err:
        wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    text = str(err.value) + repr(err.value)
    cause = err.value.__cause__ or err.value.__context__
    text += str(cause) + repr(cause)
    assert SECRET not in text


def test_redact_url_masks_only_the_password() -> None:
    assert redact_url(f"postgresql://u:{SECRET}@h:1/db") == "postgresql://u:***@h:1/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_resource_builds_the_configured_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"duckdb:///{tmp_path}/r.duckdb")
    resource = WarehouseResource(
        url=EnvVar("VISIBILITY_WAREHOUSE"), schema_name="land", lock_timeout_seconds=5
    )
    initialized = resource.process_config_and_initialize()  # what Dagster does: resolves the EnvVar
    with initialized.get_warehouse() as wh:
        assert isinstance(wh, DuckDBWarehouse)
        assert (wh.path, wh.schema, wh.lock_timeout_seconds) == (tmp_path / "r.duckdb", "land", 5)
        wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    assert (tmp_path / "r.duckdb").exists()


def test_bigquery_is_imported_only_for_bigquery_urls(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from resources.warehouse.urls import warehouse_from_url\n"
        f"warehouse_from_url('duckdb:///{tmp_path}/x.duckdb')\n"
        "warehouse_from_url('postgresql://u@h:1/db')\n"
        "assert 'resources.warehouse.bigquery' not in sys.modules\n"
        "assert 'google.cloud.bigquery' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_bigquery_urls_name_project_and_dataset() -> None:
    from resources.warehouse.bigquery import BigQueryWarehouse

    wh = warehouse_from_url("bigquery://my-project/my_dataset")
    assert isinstance(wh, BigQueryWarehouse)
    assert (wh.project, wh.dataset) == ("my-project", "my_dataset")
    with pytest.raises(WarehouseConfigError, match="VISIBILITY_WAREHOUSE"):
        warehouse_from_url("bigquery://my-project/a/b")
