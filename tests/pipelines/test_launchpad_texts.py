"""What the launchpad shows as help (resource and config descriptions) is written for users."""

from __future__ import annotations

import re

import pytest
from dagster import Config, ConfigurableIOManager, ConfigurableResource

from pipelines.definitions import build_definitions
from settings import load_settings

#: What gives a developer's docstring away: reST roles and literals, calls, Python paths.
DEVELOPER_TEXT = re.compile(r"``|:class:|:func:|:meth:|\w\(\)|\bself\b|\bEnvVar\(")


def launchpad_texts() -> dict[str, str]:
    """Each resource's description and every config field's, as Dagster builds them."""
    defs = build_definitions(load_settings({}))
    texts: dict[str, str] = {}
    for key, resource in (defs.resources or {}).items():
        if isinstance(resource, ConfigurableResource | ConfigurableIOManager):
            texts[f"resource {key}"] = type(resource).__doc__ or ""
            for name, field in type(resource).model_fields.items():
                texts[f"resource {key}.{name}"] = field.description or ""
    from assets.visibility_report import ReportConfig
    from pipelines import operation_jobs as operations
    from pipelines.sync_now import SyncNowConfig

    configs = [c for c in vars(operations).values() if isinstance(c, type) and issubclass(c, Config)]
    for config in {*configs, ReportConfig, SyncNowConfig} - {Config}:
        texts[f"config {config.__name__}"] = config.__doc__ or ""
        for name, field in config.model_fields.items():
            texts[f"config {config.__name__}.{name}"] = field.description or ""
    return texts


def test_the_launchpad_shows_no_developer_docstrings() -> None:
    texts = launchpad_texts()
    assert {
        "resource api",
        "resource warehouse",
        "resource landed_tables_io_manager",
        "resource duckdb",
    } <= set(texts)
    developer = {where: text for where, text in texts.items() if DEVELOPER_TEXT.search(text)}
    assert not developer


@pytest.mark.parametrize(
    "text", ["Settings; ``get_client()`` opens one", "see :class:`X`", "call get_client()"]
)
def test_the_pattern_catches_a_developers_text(text: str) -> None:
    assert DEVELOPER_TEXT.search(text)
