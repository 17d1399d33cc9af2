"""Fixtures that start the real sandbox on loopback (owned by the sandbox work).

``sandbox``: one per test session (per xdist worker): seed 7, ``today`` fixed at 2026-11-01 so data
and assertions are stable, no faults, limits far above anything a test does, audits complete after
0.5 s, and no backfill delay (so every tracked competitor has history from the start and trends do
not change while a test runs; tests of the backfill use ``sandbox_factory(backfill_delay_seconds=...)``).
Tests that change its state (untrack, restate, runtime config) must use ``sandbox_factory`` instead.

``sandbox_factory(config=None, **fields)``: starts a sandbox with a custom config, stopped after the test.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sandbox.config import SandboxConfig
from sandbox.faults import FaultsConfig
from sandbox.limits import LimitsConfig
from sandbox.testing import SandboxHandle, run_sandbox

SANDBOX_TODAY = dt.date(2026, 11, 1)


def loose_limits() -> LimitsConfig:
    """Limits no test reaches unless it means to."""
    return LimitsConfig(
        rate_per_second=100_000.0, burst=100_000, endpoint_limit=100_000, max_concurrent=1_000
    )


def test_sandbox_config(**fields: Any) -> SandboxConfig:
    """The session sandbox's config, with ``fields`` replaced."""
    base: dict[str, Any] = {
        "seed": 7,
        "today": SANDBOX_TODAY,
        "audit_delay_seconds": 0.5,
        "backfill_delay_seconds": 0.0,
        "limits": loose_limits(),
        "faults": FaultsConfig(profile="none"),
    }
    base.update(fields)
    return SandboxConfig(**base)


test_sandbox_config.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.fixture(scope="session")
def sandbox() -> Iterator[SandboxHandle]:
    with run_sandbox(test_sandbox_config()) as handle:
        yield handle


@pytest.fixture
def sandbox_factory() -> Iterator[Callable[..., SandboxHandle]]:
    with contextlib.ExitStack() as stack:

        def start(config: SandboxConfig | None = None, **fields: Any) -> SandboxHandle:
            return stack.enter_context(run_sandbox(config or test_sandbox_config(**fields)))

        yield start
