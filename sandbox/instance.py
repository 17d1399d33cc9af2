"""One running sandbox: config, world, state, views, counters and cursors, shared by every handler."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sandbox.auth import Principal
from sandbox.config import SandboxConfig
from sandbox.encoding import JsonResponse
from sandbox.errors import not_found
from sandbox.params import Cursors, is_uuid
from sandbox.state import SandboxState
from sandbox.stats import RequestStats
from sandbox.views import Views
from sandbox.world import Brand, World


class Sandbox:
    """One running sandbox: config, world, state, views and counters, shared by the handlers."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.world = World(config)
        self.state = SandboxState(self.world, config)
        self.views = Views(self.world, self.state)
        self.stats = RequestStats()
        self.cursors = Cursors(f"sandbox-cursor-{config.seed}")
        self.fail_endpoints: set[str] = set()

    def restate(self) -> int:
        """The restate hook (``scope["sandbox"]["restate"]``, ``POST /_sandbox/restate``)."""
        return self.state.restate()

    # -- helpers used by handlers -------------------------------------------------------------------

    def brand_for(self, principal: Principal, brand_id: str) -> Brand:
        brand = self.state.brand(brand_id) if is_uuid(brand_id) else None
        if brand is None or not principal.reaches(brand):
            raise not_found("Brand")
        return brand

    def page_response(
        self, request: Request, rows: list[dict[str, Any]], more: bool, next_offset: int | None
    ) -> Response:
        cursor = (
            self.cursors.encode(next_offset, request.url.path, request.query_params) if next_offset else None
        )
        return JsonResponse({"data": rows, "has_more": more, "next_cursor": cursor})
