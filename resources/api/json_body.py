"""JSON of the service's bodies, decoded and fingerprinted by msgspec (several times faster) with
exactly ``json``'s results: a text msgspec refuses but ``json`` accepts (``NaN``, a lone surrogate, a
byte-order mark) goes to ``json.loads``."""

from __future__ import annotations

import json
from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder(order="sorted")


def loads(body: bytes | bytearray) -> Any:
    """``json.loads(body)``, through msgspec where it reads the body."""
    try:
        return _decoder.decode(body)
    except msgspec.MsgspecError:
        return json.loads(body)


def canonical(value: Any) -> bytes:
    """One byte string per JSON value (keys sorted), for digests: equal values give equal bytes (a
    value msgspec cannot write, a lone surrogate, goes through ``json.dumps``)."""
    try:
        return _encoder.encode(value)
    except (UnicodeEncodeError, TypeError, ValueError):
        return json.dumps(value, sort_keys=True, default=str).encode("utf-8", "surrogatepass")
