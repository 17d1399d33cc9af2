"""What a command sets up before it runs a Dagster job: the warehouse proven to take writes, and the
Dagster instance that records the runs (``DAGSTER_HOME``'s)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from settings import ConfigError, Settings


def recording_instance() -> Any:
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


def check_warehouse(settings: Settings) -> None:
    """Prove the warehouse takes writes before the first request spends the API's rate budget."""
    from urllib.parse import urlsplit

    from resources.warehouse.contract import WarehouseConfigError
    from resources.warehouse.factory import warehouse_from_url
    from resources.warehouse.urls import redact_url

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
