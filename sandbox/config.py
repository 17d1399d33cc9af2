"""Configuration of one sandbox instance: the world it generates and how it behaves over time."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

from sandbox.faults import FaultsConfig
from sandbox.limits import LimitsConfig

Size = Literal["demo", "large"]


def _utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


@dataclass
class SandboxConfig:
    """Everything that shapes a sandbox; equal configs serve identical data.

    ``today`` is the first day without data: the world holds ``history_days`` days before it.
    The delays and nested limits/faults may change at runtime (``POST /_sandbox/config``); the seed,
    ``today``, ``history_days`` and ``size`` are fixed for the life of the instance.
    """

    seed: int = 7
    today: dt.date = field(default_factory=_utc_today)
    history_days: int = 120
    size: Size = "demo"
    audit_delay_seconds: float = 2.0
    backfill_delay_seconds: float = 2.0
    restate_days: int = 3
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    faults: FaultsConfig = field(default_factory=FaultsConfig)

    def __post_init__(self) -> None:
        if self.size not in ("demo", "large"):
            raise ValueError(f"size must be 'demo' or 'large', got {self.size!r}")
        if self.history_days < 1:
            raise ValueError("history_days must be >= 1")
        if self.restate_days < 0:
            raise ValueError("restate_days must be >= 0")

    @property
    def history_start(self) -> dt.date:
        """The first day with data."""
        return self.today - dt.timedelta(days=self.history_days)
