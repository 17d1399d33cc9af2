"""JSON of the service's bodies, decoded and fingerprinted at C speed with exactly ``json``'s results.

msgspec decodes a page several times faster than ``json.loads`` (bench/RESULTS.md, *CPU per landed
row*), integers of any size included, but refuses a few texts that ``json`` accepts (``NaN``, a lone
surrogate, a byte-order mark, a number beyond a double's range): those bodies are decoded by
``json.loads``. So every body decodes to what
``json.loads`` returns, or fails as it fails.
"""

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
    """One byte string per JSON value (keys sorted), for digests: equal values give equal bytes.

    A value msgspec cannot write (a lone surrogate, which only ``json.loads`` lets through) goes
    through ``json.dumps``, which depends on the value alone: a value's bytes never depend on the call."""
    try:
        return _encoder.encode(value)
    except (UnicodeEncodeError, TypeError, ValueError):
        return json.dumps(value, sort_keys=True, default=str).encode("utf-8", "surrogatepass")
