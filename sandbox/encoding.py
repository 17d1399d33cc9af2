"""JSON bodies of ``/v1`` answers, encoded with msgspec instead of the stdlib.

The stdlib encoder took a quarter to a third of the sandbox's CPU per large page, and the sandbox
shares the benchmark machine with the connector it serves. msgspec writes the same JSON for what the views
build (str, int, bool, None, lists, dicts with str keys, finite floats): the same bytes, except that
a float in exponent form is spelled ``1e-6`` where the stdlib writes ``1e-06`` (same value once
parsed). Whatever msgspec refuses (numpy scalars, say) goes to the stdlib, which answers or raises as
before. One difference remains by design: msgspec writes a NaN or an infinity as ``null`` where the
stdlib raises; the views never build one (every ratio has a nonzero denominator).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from starlette.responses import JSONResponse

_encoder = msgspec.json.Encoder()


def encode_json(content: Any) -> bytes:
    """``content`` as compact UTF-8 JSON, as Starlette's ``JSONResponse`` renders it."""
    try:
        return _encoder.encode(content)
    except (TypeError, ValueError, OverflowError):
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


class JsonResponse(JSONResponse):
    """Starlette's ``JSONResponse`` with the body encoded by :func:`encode_json`."""

    def render(self, content: Any) -> bytes:
        return encode_json(content)
