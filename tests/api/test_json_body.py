"""The fast JSON path decodes every body to what ``json.loads`` returns, or fails as it fails."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resources.api import json_body

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def _same(a: object, b: object) -> bool:
    """Equal values of equal types all the way down (``1 == 1.0`` is not enough here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))  # type: ignore[arg-type]
    return a == b


@settings(max_examples=400, deadline=None)
@given(json_values, st.booleans())
def test_a_body_decodes_to_exactly_what_json_loads_returns(value: object, compact: bool) -> None:
    separators = (",", ":") if compact else (", ", ": ")
    body = json.dumps(value, separators=separators, ensure_ascii=not compact).encode("utf-8", "surrogatepass")
    assert _same(json_body.loads(body), json.loads(body))


@pytest.mark.parametrize(
    "body",
    [
        b'{"n": 18446744073709551616}',  # one past uint64
        b'{"n": -9223372036854775809}',  # one below int64
        b'{"n": 123456789012345678901234567890}',
        b'{"n": NaN, "m": -Infinity}',  # json accepts these, msgspec refuses them
        b'"\\ud800"',  # a lone surrogate
        b"\xef\xbb\xbf{}",  # a byte-order mark
        b'{"a": 1, "a": 2}',
        b"1e400",
    ],
)
def test_what_msgspec_refuses_is_read_by_json(body: bytes) -> None:
    assert _same(json_body.loads(body), json.loads(body))


def test_an_integer_beyond_64_bits_stays_an_exact_integer() -> None:
    decoded = json_body.loads(b'{"big": 18446744073709551616, "small": 7}')
    assert decoded == {"big": 2**64, "small": 7} and isinstance(decoded["big"], int)


@pytest.mark.parametrize("body", [b"", b"{", b'{"a": }', b"\xff\xfe\x00", b"[1, 2"])
def test_invalid_json_fails_as_json_loads_fails(body: bytes) -> None:
    with pytest.raises((ValueError, UnicodeDecodeError)) as ours:
        json_body.loads(body)
    with pytest.raises((ValueError, UnicodeDecodeError)) as theirs:
        json.loads(body)
    assert type(ours.value) is type(theirs.value)


def test_canonical_bytes_ignore_key_order_and_tell_values_apart() -> None:
    assert json_body.canonical({"b": 1, "a": [1, {"y": 2, "x": 1}]}) == json_body.canonical(
        {"a": [1, {"x": 1, "y": 2}], "b": 1}
    )
    assert json_body.canonical({"a": 1}) != json_body.canonical({"a": 1.5})
    assert json_body.canonical({"a": "1"}) != json_body.canonical({"a": 1})


def test_canonical_bytes_of_what_only_json_reads_ignore_key_order_too() -> None:
    """A lone surrogate takes the ``json.dumps`` path: its keys are sorted there as well."""
    ordered = json_body.canonical({"a": 1, "b": "\ud800"})
    assert json_body.canonical({"b": "\ud800", "a": 1}) == ordered
    assert ordered.startswith(b'{"a"')


@pytest.mark.parametrize("value", [{"big": 2**70, "id": "x"}, {"text": "\ud800", "n": float("nan")}])
def test_canonical_bytes_of_what_only_json_reads_are_the_same_on_every_call(value: dict) -> None:
    assert json_body.canonical(value) == json_body.canonical(dict(value))
    assert json_body.canonical(value) != json_body.canonical({**value, "other": 1})
