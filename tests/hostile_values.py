"""Values of every JSON type and of a few Python types no decoder gives, at the edges of the
warehouse's types: what the fast paths of the transforms and of validation are compared on."""

from __future__ import annotations

import datetime as dt
import enum
from decimal import Decimal
from fractions import Fraction
from typing import Any

FLOAT_MAX = 1.7976931348623157e308


class Rank(enum.IntEnum):
    FIRST = 1


class Label(str):
    pass


class Ratio(float):
    pass


HOSTILE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**70,
    int(FLOAT_MAX),
    int(FLOAT_MAX) + 1,
    2**1100,
    -(2**1100),
    0.0,
    -0.0,
    2.0,
    1.5,
    1e308,
    float("inf"),
    float("nan"),
    "",
    "x",
    "3",
    "1.5",
    "true",
    "2024-03-01",
    "2024-03-01T10:00:00Z",
    "2024-03-01T10:00:00+02:00",
    "2024-03-01T10:00:00",
    "2024-02-30",
    "\ud800",
    b"x",
    bytearray(b"x"),
    [],
    ["a"],
    ["a", None],
    [1],
    [["a"]],
    ("a",),
    {},
    {"a": 1},
    dt.date(2024, 3, 1),
    dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC),
    dt.datetime(2024, 3, 1, 10),
    dt.timedelta(days=1),
    Decimal("1"),
    Decimal("1.5"),
    Fraction(1, 2),
    Rank.FIRST,
    Label("x"),
    Ratio(1.5),
]
