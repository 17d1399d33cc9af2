"""Endpoints outside ``/v1``: request accounting, keys, restatement, runtime config, tracking, OpenAPI.

They are never limited, faulted or counted (``V1Gate`` sends only ``/v1`` through those layers).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandbox.errors import ApiError, not_found
from sandbox.instance import Sandbox
from sandbox.openapi import openapi_document
from sandbox.params import is_uuid, json_body, required_string

_RUNTIME_DELAYS = ("audit_delay_seconds", "backfill_delay_seconds", "restate_days")


def admin_routes(sb: Sandbox) -> list[Route]:
    """The routes of ``sandbox/routes.py``'s ``ADMIN_ENDPOINTS``."""

    def admin_stats(request: Request) -> Response:
        return JSONResponse(sb.stats.snapshot())

    def admin_stats_reset(request: Request) -> Response:
        sb.stats.reset()
        return JSONResponse({"reset": True})

    def admin_keys(request: Request) -> Response:
        return JSONResponse({"keys": sb.world.keys_by_role})

    def admin_restate(request: Request) -> Response:
        return JSONResponse({"revision": sb.restate(), "restate_days": sb.config.restate_days})

    def admin_config_get(request: Request) -> Response:
        return JSONResponse(config_view(sb))

    async def admin_config(request: Request) -> Response:
        body = await json_body(request)
        try:
            apply_runtime_config(sb, body)
        except (ValueError, TypeError) as exc:
            raise ApiError("invalid_request", str(exc)) from None
        return JSONResponse(config_view(sb))

    async def admin_track(request: Request) -> Response:
        body = await json_body(request)
        brand_id, name = required_string(body, "brand_id"), required_string(body, "brand_name")
        brand = sb.state.brand(brand_id) if is_uuid(brand_id) else None
        if brand is None:
            raise not_found("Brand")
        tracking = sb.state.track(brand, name)
        return JSONResponse({"data": sb.views.tracked_row(tracking)}, status_code=201)

    def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    return [
        Route("/_sandbox/stats", admin_stats, methods=["GET"]),
        Route("/_sandbox/stats/reset", admin_stats_reset, methods=["POST"]),
        Route("/_sandbox/keys", admin_keys, methods=["GET"]),
        Route("/_sandbox/restate", admin_restate, methods=["POST"]),
        Route("/_sandbox/config", admin_config_get, methods=["GET"]),
        Route("/_sandbox/config", admin_config, methods=["POST"]),
        Route("/_sandbox/track", admin_track, methods=["POST"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]


def config_view(sb: Sandbox) -> dict[str, Any]:
    c = sb.config
    return {
        "seed": c.seed,
        "today": c.today.isoformat(),
        "history_days": c.history_days,
        "size": c.size,
        "audit_delay_seconds": c.audit_delay_seconds,
        "backfill_delay_seconds": c.backfill_delay_seconds,
        "restate_days": c.restate_days,
        "revision": sb.state.revision,
        "fail_endpoints": sorted(sb.fail_endpoints),
        "limits": c.limits.to_dict(),
        "faults": c.faults.to_dict(),
    }


def apply_runtime_config(sb: Sandbox, changes: dict[str, Any]) -> None:
    """Apply ``POST /_sandbox/config``: delays, ``fail_endpoints``, and ``limits``/``faults`` fields.

    Seed, ``today``, ``history_days`` and ``size`` shape the world and cannot change at runtime.
    """
    allowed = {*_RUNTIME_DELAYS, "fail_endpoints", "limits", "faults"}
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise ValueError(f"cannot change at runtime: {', '.join(unknown)}")
    for section in ("limits", "faults"):
        if section in changes and not isinstance(changes[section], dict):
            raise ValueError(f"'{section}' must be an object of settings")
    for name in _RUNTIME_DELAYS:
        if name in changes:
            value = changes[name]
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"'{name}' must be a number >= 0")
    if "fail_endpoints" in changes:
        endpoints = changes["fail_endpoints"]
        if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
            raise ValueError("'fail_endpoints' must be an array of 'METHOD /v1/template' strings")
    if "limits" in changes:
        sb.config.limits.update(**changes["limits"])
    if "faults" in changes:
        sb.config.faults.update(**changes["faults"])
    for name in _RUNTIME_DELAYS:
        if name in changes:
            setattr(sb.config, name, int(changes[name]) if name == "restate_days" else float(changes[name]))
    if "fail_endpoints" in changes:
        sb.fail_endpoints = set(changes["fail_endpoints"])
