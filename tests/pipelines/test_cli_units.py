"""Pure parts of the command line: engine spans, settings, usage errors and the sandbox's options."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.cli import build_parser, main
from pipelines.cli_output import EXIT_CONFIG
from resources.api.endpoints import ENGINES_WITH_ALL, engine_groups
from sandbox.__main__ import config_of
from sandbox.config import SandboxConfig
from sandbox.faults import PROFILES, FaultsConfig
from settings import ConfigError, load_settings


def test_engines_become_contiguous_spans_of_the_partition_order() -> None:
    assert engine_groups(["chatgpt", "claude", "all"], ENGINES_WITH_ALL) == [
        ("chatgpt", "claude"),
        ("all", "all"),
    ]
    assert engine_groups(list(ENGINES_WITH_ALL), ENGINES_WITH_ALL) == [("chatgpt", "all")]
    assert engine_groups(["all"], ENGINES_WITH_ALL[:-1]) == []


def test_settings_errors_name_the_variable() -> None:
    with pytest.raises(ConfigError, match="VISIBILITY_LOOKBACK_DAYS"):
        load_settings({"VISIBILITY_LOOKBACK_DAYS": "-1"})
    with pytest.raises(ConfigError, match="VISIBILITY_START_DATE"):
        load_settings({"VISIBILITY_START_DATE": "01/02/2026"})
    with pytest.raises(ConfigError, match="VISIBILITY_API_URL"):
        load_settings({"VISIBILITY_API_URL": "ftp://x"})
    with pytest.raises(ConfigError, match="VISIBILITY_DUCKDB_MEMORY_LIMIT: '64'"):
        load_settings({"VISIBILITY_DUCKDB_MEMORY_LIMIT": "64"})


def test_the_duckdb_memory_budget_reaches_the_warehouse_resource() -> None:
    from pipelines.resources import build_resources

    assert load_settings({}).duckdb_memory_limit == "64MB"
    settings = load_settings({"VISIBILITY_DUCKDB_MEMORY_LIMIT": "1GiB"})
    assert build_resources(settings)["warehouse"].duckdb_landing_memory_limit == "1GiB"


def test_the_key_never_shows_in_the_settings_repr() -> None:
    settings = load_settings(
        {"VISIBILITY_API_URL": "https://api.example.com", "VISIBILITY_API_KEY": "sekret-0123456789abcdef"}
    )
    assert "sekret-0123456789abcdef" not in repr(settings)


def test_usage_errors_exit_with_the_config_code() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--start", "yesterday"])
    assert exc.value.code == EXIT_CONFIG


def test_main_gives_its_caller_back_the_sigterm_handler_it_had(monkeypatch: pytest.MonkeyPatch) -> None:
    """In its own process the command turns SIGTERM into a Ctrl+C; a caller of ``main()`` (a test, an
    embedding program) keeps its own handler once ``main()`` returns."""
    import signal

    def callers_own(signum: int, frame: object) -> None:
        raise AssertionError("not delivered in this test")

    monkeypatch.delenv("VISIBILITY_API_URL", raising=False)  # `check` stops at the missing setting
    previous = signal.signal(signal.SIGTERM, callers_own)
    try:
        assert main(["check"]) == EXIT_CONFIG
        assert signal.getsignal(signal.SIGTERM) is callers_own
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("profile", PROFILES)
def test_visibility_sync_sandbox_takes_the_options_and_fault_profiles_of_python_m_sandbox(
    profile: str,
) -> None:
    argv = ["--seed", "3", "--faults", profile, "--size", "large", "--today", "2026-05-10"]
    args = build_parser().parse_args(["sandbox", *argv])
    expected = SandboxConfig(
        seed=3, size="large", today=dt.date(2026, 5, 10), faults=FaultsConfig(profile=profile, seed=3)
    )
    assert config_of(args) == expected
