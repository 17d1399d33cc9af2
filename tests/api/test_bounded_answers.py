"""Every answer is bounded: its body in bytes, raw and decoded, and its time, from connect to the
last byte, by the retry deadline. Against a real HTTP server on loopback (``proxies.fake_service``)."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from resources.api.client import VisibilityClient
from resources.api.errors import ResponseShapeError, SyncCancelled, TransportError, VisibilityAPIError
from tests.api.proxies import Raw, Seen, fake_service

KEY = "vsk_bounded0123456789abcdef"
BRANDS = {"data": [{"id": "b1", "name": "One"}], "has_more": False, "next_cursor": None}
MIB = 1024 * 1024


def gzip_bomb(expanded_mib: int) -> bytes:
    """A gzip member of ``expanded_mib`` MiB of zeros, built from one compressed MiB repeated (a
    full flush makes each block stand alone), about a thousandth of its expanded size."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = deflate.compress(bytes(MIB)) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    zeros = bytes(MIB)
    for _ in range(expanded_mib):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = crc.to_bytes(4, "little") + (expanded_mib * MIB % 2**32).to_bytes(4, "little")
    return header + block * expanded_mib + deflate.flush(zlib.Z_FINISH) + trailer


def client(url: str, **options: Any) -> VisibilityClient:
    options.setdefault("retry_deadline_seconds", 5.0)
    options.setdefault("timeout_seconds", min(30.0, options["retry_deadline_seconds"]))
    return VisibilityClient(url, KEY, backoff_base_seconds=0.01, **options)


def call_in_thread(fn: Any, timeout: float = 60.0) -> Any:
    """``fn()``'s result or exception; fails the test (instead of hanging it) if it takes longer."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"the call was still running after {timeout}s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_the_gzip_bomb_is_cut_at_the_cap_naming_the_endpoint_and_request_id() -> None:
    bomb = gzip_bomb(256)
    assert len(bomb) < 400_000
    with (
        fake_service(
            lambda seen: (
                200,
                {"Content-Encoding": "gzip", "X-Request-Id": "req-bomb"},
                Raw([bomb], len(bomb)),
            )
        ) as service,
        client(service.url, max_response_bytes=4 * MIB) as api,
        pytest.raises(ResponseShapeError) as caught,
    ):
        list(api.list_brands())
    text = str(caught.value)
    assert "larger than 4194304 bytes" in text and "VISIBILITY_MAX_RESPONSE_BYTES" in text
    assert "[endpoint GET /v1/brands]" in text and "[X-Request-Id req-bomb]" in text
    assert len(service.seen) == 1  # the same page would be as large again: not retried
    assert service.seen[0].headers["Accept-Encoding"] == "gzip, deflate"


def test_a_body_longer_than_the_cap_is_refused_by_its_content_length_and_as_it_streams() -> None:
    big = b'{"data": [], "pad": "' + b"x" * (2 * MIB) + b'"}'

    def script(seen: Seen) -> tuple[int, dict[str, str], Any]:
        declared = len(big) if seen.path.endswith("/brands") else None  # no length: read to the end
        return 200, {}, Raw([big[i : i + 65536] for i in range(0, len(big), 65536)], declared)

    with fake_service(script) as service, client(service.url, max_response_bytes=MIB) as api:
        with pytest.raises(ResponseShapeError, match=f"Content-Length {len(big)}"):
            list(api.list_brands())
        with pytest.raises(ResponseShapeError, match="bytes received"):
            api.get_brand("b1")


@pytest.mark.parametrize(
    "encoding, encode",
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),  # RFC 9110's zlib stream
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # the raw deflate some servers send
    ],
)
def test_compressed_bodies_within_the_cap_are_decoded(encoding: str, encode: Any) -> None:
    import json

    body = encode(json.dumps(BRANDS).encode())
    with (
        fake_service(lambda seen: (200, {"Content-Encoding": encoding}, Raw([body], len(body)))) as service,
        client(service.url) as api,
    ):
        assert list(api.list_brands()) == BRANDS["data"]


def test_a_cut_gzip_body_is_an_invalid_body_and_not_decoded() -> None:
    import json

    body = gzip.compress(json.dumps(BRANDS).encode())[:-12]
    with (
        fake_service(lambda seen: (200, {"Content-Encoding": "gzip"}, Raw([body], len(body)))) as service,
        client(service.url, retry_deadline_seconds=1.0) as api,
        pytest.raises(VisibilityAPIError, match="invalid_body"),
    ):
        list(api.list_brands())


def test_an_encoding_the_client_did_not_ask_for_is_refused() -> None:
    with (
        fake_service(
            lambda seen: (200, {"Content-Encoding": "br"}, Raw([b"\x0b\x02\x80{}\x03"], 6))
        ) as service,
        client(service.url) as api,
        pytest.raises(ResponseShapeError, match="encoded as 'br'"),
    ):
        list(api.list_brands())


def _drip(total: int) -> Iterator[bytes]:
    for _ in range(total):
        yield b" "


def test_a_body_that_drips_in_ends_at_the_retry_deadline() -> None:
    """A byte every 0.5 s keeps every read within its timeout; the whole answer still ends at the
    deadline (2 s), not after the 5,000 bytes (40 minutes)."""
    with (
        fake_service(lambda seen: (200, {}, Raw(_drip(5000), 5000, pause=0.5))) as service,
        client(service.url, retry_deadline_seconds=2.0) as api,
        pytest.raises(TransportError) as caught,
    ):
        call_in_thread(lambda: list(api.list_brands()))
    assert "still arriving at the retry deadline" in str(caught.value)
    assert len(service.seen) == 1


def test_rate_headers_with_a_limit_of_zero_cost_no_wait() -> None:
    """``X-RateLimit-Limit: 0`` on an answered request contradicts itself: it holds nothing back
    (it cost a second a request, 30 s a table)."""
    headers = {"X-RateLimit-Limit": "0", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "0"}
    with (
        fake_service(lambda seen: (200, headers, {"data": {"id": "b1", "name": "One"}})) as service,
        client(service.url) as api,
    ):
        for _ in range(5):
            api.get_brand("b1")
        waited = api.stats.wait_seconds_by_cause
    assert len(service.seen) == 5
    assert waited.get("pacing", 0.0) == 0.0, waited


def test_a_cancelled_sync_stops_reading_a_body_that_drips_in() -> None:
    """The sync's deadline is ten minutes away: the cancel, not the deadline, ends the read."""
    with (
        fake_service(lambda seen: (200, {}, Raw(_drip(5000), 5000, pause=0.2))) as service,
        client(service.url, retry_deadline_seconds=600.0) as api,
    ):
        threading.Timer(1.0, api.budget.cancel).start()
        with pytest.raises(SyncCancelled):
            call_in_thread(lambda: list(api.list_brands()))
