"""An audit's ``poll`` is only ever a path on the configured service: the key never travels elsewhere."""

from __future__ import annotations

import pytest

from resources.api.client import VisibilityClient
from resources.api.errors import ResponseShapeError

KEY = "vsk_0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    "poll", ["https://elsewhere.example/v1/audit-reports/a1", "//elsewhere.example/a1", "a1"]
)
def test_an_audit_poll_that_is_not_a_path_is_refused_before_any_request(poll: str) -> None:
    with VisibilityClient("http://127.0.0.1:9", KEY) as client:
        with pytest.raises(ResponseShapeError, match="must be a path starting with '/'"):
            client.poll_audit(poll)
        assert client.stats.total_requests == 0
