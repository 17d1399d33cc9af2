"""The msgspec encoder of /v1 bodies writes what Starlette's stdlib ``JSONResponse`` wrote."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from starlette.responses import JSONResponse

from sandbox.encoding import JsonResponse, encode_json


def stdlib(content: Any) -> bytes:
    return JSONResponse(content).body


HOSTILE_BUT_JSON: list[Any] = [
    {
        "name": "Zoë Café — 東京 🚀",
        "quote": 'a "b" \\ c',
        "controls": "\x00\x01\n\t\x1f\x7f",
        "seps": "\u2028\u2029",
    },
    {"big": [2**63 - 1, 2**63, 2**64, -(2**70), 10**400, -(10**400)]},
    {"bools": [True, False, None], "empty": [{}, [], ""], "nested": [[[{"a": [1, {"b": None}]}]]]},
    {1: "int key", 2.5: "float key", "x": -0.0, None: "null key", False: "bool key"},
    {"floats": [0.1, 1 / 3, 2 / 3, 123.456, 99.9999, 0.000123, 1e15, 123456789.125]},
    ("tuple", 1),
]


@pytest.mark.parametrize("content", HOSTILE_BUT_JSON)
def test_json_values_encode_to_the_same_bytes(content: Any) -> None:
    assert encode_json(content) == stdlib(content)


def test_floats_differ_at_most_in_the_spelling_of_their_exponent() -> None:
    """Rates the views round to 4 or 6 decimals, sentiments in hundredths, tiny and huge floats."""
    rng = random.Random(7)
    values = [round(rng.uniform(0, 100), 4) for _ in range(5000)]
    values += [round(rng.random() / 10 ** rng.randint(0, 8), 6) for _ in range(5000)]
    values += [s / 100.0 for s in range(-100, 101)] + [1e-7, 5e-6, 1e16, 1e22, 1.5e300, 2.5e-300]
    for value in values:
        ours, theirs = encode_json(value), stdlib(value)
        assert float(ours) == float(theirs) == value
        if b"e" not in theirs:
            assert ours == theirs, value
        else:  # 1e-06 vs 1e-6 or 0.000001, 1e+16 vs 1e16: the same number, spelled otherwise
            assert b"e" in theirs and value != 0


def test_values_msgspec_refuses_go_to_the_stdlib_which_answers_or_raises_as_before() -> None:
    assert encode_json({"x": np.float64(0.25)}) == stdlib({"x": np.float64(0.25)}) == b'{"x":0.25}'
    with pytest.raises(TypeError):
        encode_json({"x": np.int64(3)})
    with pytest.raises(TypeError):
        stdlib({"x": np.int64(3)})
    assert encode_json({None: 1, True: 2}) == stdlib({None: 1, True: 2}) == b'{"null":1,"true":2}'


def test_non_finite_floats_are_null_where_the_stdlib_refuses_them() -> None:
    """The one known difference: the views never build a NaN or an infinity (ratios of counts with a
    nonzero denominator), so no answer changes; pinned here so that a change of msgspec shows."""
    for value in (math.nan, math.inf, -math.inf):
        assert encode_json({"x": value}) == b'{"x":null}'
        with pytest.raises(ValueError, match="Out of range float"):
            stdlib({"x": value})


def test_the_response_keeps_starlettes_media_type_and_content_length() -> None:
    content = {"data": [{"name": "Zoë", "n": 2**64}], "has_more": False, "next_cursor": None}
    ours, theirs = (
        JsonResponse(content, status_code=201, headers={"X-A": "1"}),
        JSONResponse(content, 201, {"X-A": "1"}),
    )
    assert ours.body == theirs.body
    assert ours.status_code == theirs.status_code == 201
    assert ours.raw_headers == theirs.raw_headers
