"""The sandbox's HTTP application: routes, request validation, and the middleware stack.

Endpoint templates and the scope hooks the limits and faults middlewares use are listed in
``sandbox/routes.py``. The stack, outermost first::

    RequestIdMiddleware   X-Request-Id on every response, hooks in scope["sandbox"]
    StatsMiddleware       counts /v1 requests by template and status
    V1Gate                /v1 -> LimitsMiddleware -> FaultsMiddleware -> router; the rest -> router

Handlers are synchronous (Starlette runs them in its thread pool), so slow requests really are in
flight at the same time and the concurrency limit can bind.

Decisions where the spec is silent (also in ``sandbox/README.md``):

- ``403 forbidden``: a trialing workspace may read everything but not order audits
  (``POST /v1/audit-reports``), which spend money.
- ``500 internal_error``: any ``/v1`` request with the header ``X-Sandbox-Fail: 1``, or to an
  endpoint template listed in the runtime setting ``fail_endpoints``.
- A malformed id in a path is a record that does not exist (404); a malformed id in a query
  parameter or body is a bad request (400 ``invalid_request``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandbox.auth import Principal, authenticate
from sandbox.config import SandboxConfig
from sandbox.errors import ApiError, error_response, not_found
from sandbox.faults import FaultsMiddleware
from sandbox.limits import LimitsMiddleware
from sandbox.openapi import openapi_document
from sandbox.params import (
    Cursors,
    is_uuid,
    parse_choice,
    parse_engine,
    parse_limit,
    parse_uuid_param,
    parse_window,
)
from sandbox.routes import FAIL_HEADER, match_template
from sandbox.state import SandboxState
from sandbox.stats import RequestStats
from sandbox.views import Views
from sandbox.world import ENGINES, Brand, World, iso

logger = logging.getLogger(__name__)

MAX_LIST_LIMIT = 999
MAX_ANSWERS_LIMIT = 100
MAX_CITATION_URLS_LIMIT = 2000
_RUNTIME_DELAYS = ("audit_delay_seconds", "backfill_delay_seconds", "restate_days")

Handler = Callable[[Request, Principal], Response]


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
        return JSONResponse({"data": rows, "has_more": more, "next_cursor": cursor})


async def _json_body(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ApiError("invalid_request", "Send the body as JSON with 'Content-Type: application/json'.")
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise ApiError("invalid_request", "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError("invalid_request", "The body must be a JSON object.")
    return body


def _required_string(body: dict[str, Any], name: str, max_length: int = 500) -> str:
    if name not in body or body[name] is None:
        raise ApiError("missing_parameter", f"'{name}' is required.")
    value = body[name]
    if not isinstance(value, str) or not value.strip() or len(value) > max_length:
        raise ApiError(
            "invalid_request", f"'{name}' must be a non-empty string of at most {max_length} characters."
        )
    return value.strip()


def _as_api_error(request: Request, exc: Exception) -> ApiError:
    """Unexpected failures become the spec's 500, quoting the request id, inside the middleware stack."""
    if isinstance(exc, ApiError):
        return exc
    logger.exception("sandbox handler failed")
    rid = request.scope.get("sandbox", {}).get("request_id", "")
    return ApiError("internal_error", f"Internal error; quote X-Request-Id {rid} when reporting it.")


def build_routes(sb: Sandbox) -> list[Route]:
    """The /v1 routes and the admin routes of one sandbox."""

    def api(handler: Callable[..., Any], *, is_async: bool = False) -> Callable[[Request], Any]:
        """Authenticate, honour the documented 500 trigger, then run the handler."""

        def check(request: Request) -> Principal:
            template = match_template(request.method, request.url.path)
            if request.headers.get(FAIL_HEADER) or template in sb.fail_endpoints:
                rid = request.scope.get("sandbox", {}).get("request_id", "")
                raise ApiError(
                    "internal_error", f"Internal error; quote X-Request-Id {rid} when reporting it."
                )
            return authenticate(request.headers, sb.world)

        if is_async:

            async def run_async(request: Request) -> Response:
                try:
                    return await handler(request, check(request))
                except Exception as exc:
                    raise _as_api_error(request, exc) from exc

            return run_async

        def run(request: Request) -> Response:
            try:
                return handler(request, check(request))
            except Exception as exc:
                raise _as_api_error(request, exc) from exc

        return run

    # -- brands --------------------------------------------------------------------------------------

    def list_brands(request: Request, who: Principal) -> Response:
        q = request.query_params
        limit = parse_limit(q, MAX_LIST_LIMIT)
        offset = sb.cursors.offset(request.url.path, q)
        rows = [b.api_row() for b in sb.state.workspace_brands(who.workspace.id) if who.reaches(b)]
        page = sb.views.page(rows, offset, limit)
        return sb.page_response(request, page.rows, page.has_more, page.next_offset)

    async def create_brand(request: Request, who: Principal) -> Response:
        if who.brand_scoped:
            raise ApiError("brand_scope_forbidden", "A brand-scoped key cannot create brands.")
        body = await _json_body(request)
        fields: dict[str, Any] = {
            "name": _required_string(body, "name"),
            "domain": _required_string(body, "domain"),
        }
        for name in ("category", "country"):
            if name in body:
                fields[name] = _required_string(body, name)
        engines = body.get("engines", ["chatgpt"])
        if not isinstance(engines, list) or not engines:
            raise ApiError("invalid_request", "'engines' must be a non-empty array of engines.")
        if any(e not in ENGINES for e in engines):
            raise ApiError("invalid_engine", f"'engines' must contain only: {', '.join(ENGINES)}.")
        fields["engines"] = tuple(e for e in ENGINES if e in engines)
        aliases = body.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise ApiError("invalid_request", "'aliases' must be an array of strings.")
        fields["aliases"] = tuple(aliases)
        brand = sb.state.create_brand(who.workspace.id, fields)
        return JSONResponse({"data": brand.api_row()}, status_code=201)

    def get_brand(request: Request, who: Principal) -> Response:
        return JSONResponse({"data": sb.brand_for(who, request.path_params["id"]).api_row()})

    # -- topics and prompts ----------------------------------------------------------------------------

    def list_topics(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        limit = parse_limit(q, MAX_LIST_LIMIT)
        offset = sb.cursors.offset(request.url.path, q)
        rows = [sb.views.topic_row(brand, t) for t in sb.state.topic_list(brand)]
        page = sb.views.page(rows, offset, limit)
        return sb.page_response(request, page.rows, page.has_more, page.next_offset)

    async def create_topic(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        name = _required_string(await _json_body(request), "name", 200)
        record = sb.state.create_topic(brand, name)
        return JSONResponse({"data": sb.views.topic_row(brand, record)}, status_code=201)

    async def rename_topic(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        topic_id = request.path_params["topicId"]
        if not is_uuid(topic_id):
            raise not_found("Topic")
        name = _required_string(await _json_body(request), "name", 200)
        record = sb.state.rename_topic(brand, topic_id, name)
        return JSONResponse({"data": sb.views.topic_row(brand, record)})

    def list_prompts(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        limit = parse_limit(q, MAX_LIST_LIMIT)
        offset = sb.cursors.offset(request.url.path, q)
        page = sb.views.page(sb.views.prompt_rows(brand), offset, limit)
        return sb.page_response(request, page.rows, page.has_more, page.next_offset)

    # -- answers and mentions ----------------------------------------------------------------------------

    def list_answers(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        engine = parse_engine(q)
        window = parse_window(q, sb.config.today)
        limit = parse_limit(q, MAX_ANSWERS_LIMIT)
        offset = sb.cursors.offset(request.url.path, q)
        page = sb.views.answers(brand, window, engine, offset, limit)
        return sb.page_response(request, page.rows, page.has_more, page.next_offset)

    def list_mentions(request: Request, who: Principal) -> Response:
        prompt_id = request.path_params["id"]
        brand = sb.world.prompt_owner.get(prompt_id)
        if brand is None or not who.reaches(brand):
            raise not_found("Prompt")
        q = request.query_params
        engine = parse_engine(q)
        window = parse_window(q, sb.config.today)
        limit = parse_limit(q, MAX_LIST_LIMIT)
        offset = sb.cursors.offset(request.url.path, q)
        prompt = brand.prompt_by_id[prompt_id]
        page = sb.views.mentions(brand, prompt.index, window, engine, offset, limit)
        return sb.page_response(request, page.rows, page.has_more, page.next_offset)

    # -- generations ------------------------------------------------------------------------------------

    def list_generations(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        limit = parse_limit(request.query_params, MAX_LIST_LIMIT)
        rows = [sb.views.generation_row(g, full=False) for g in brand.generations[:limit]]
        total = len(brand.generations)
        return JSONResponse(
            {
                "data": rows,
                "has_more": False,
                "next_cursor": None,
                "total_count": total,
                "capped": total > len(rows),
            }
        )

    def get_generation(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        generation_id = request.path_params["generationId"]
        for generation in brand.generations:
            if generation.id == generation_id:
                return JSONResponse({"data": sb.views.generation_row(generation, full=True)})
        raise not_found("Generation")

    # -- citations ----------------------------------------------------------------------------------------

    def citation_trends(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        domain, url = q.get("domain"), q.get("url")
        if domain is not None and url is not None:
            raise ApiError("invalid_request", "'domain' and 'url' are mutually exclusive; send one of them.")
        if url is not None and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
            raise ApiError("invalid_request", "'url' must be an absolute http(s) URL.")
        if domain is not None and ("." not in domain.strip(".") or "/" in domain or " " in domain):
            raise ApiError("invalid_request", "'domain' must be a domain name such as example.com.")
        engine = parse_engine(q)
        topic_id = _topic_filter(brand, q)
        window = parse_window(q, sb.config.today)
        return JSONResponse({"data": sb.views.citation_trend(brand, window, engine, topic_id, domain, url)})

    def _topic_filter(brand: Brand, q: Any) -> str | None:
        topic_id = parse_uuid_param(q, "topic_id")
        if topic_id is not None and topic_id not in sb.state.topics.get(brand.id, {}):
            raise not_found("Topic")
        return topic_id

    def citation_urls(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        engine = parse_engine(q)
        topic_id = _topic_filter(brand, q)
        window = parse_window(q, sb.config.today)
        limit = parse_limit(q, MAX_CITATION_URLS_LIMIT)
        return JSONResponse(sb.views.citation_urls(brand, window, engine, topic_id, limit))

    # -- competitors ---------------------------------------------------------------------------------------

    def list_tracked(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        limit = parse_limit(q, MAX_LIST_LIMIT)
        offset = sb.cursors.offset(request.url.path, q)
        rows = [sb.views.tracked_row(t) for t in sb.state.tracked_list(brand)]
        page = sb.views.page(rows, offset, limit)
        return sb.page_response(request, page.rows, page.has_more, page.next_offset)

    def untrack(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        tracking = sb.state.untrack(brand, request.path_params["competitorId"])
        return JSONResponse(
            {"data": {"id": tracking.competitor_id, "brand_name": tracking.member.name, "untracked": True}}
        )

    def competitor_trends(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        engine = parse_engine(q)
        window = parse_window(q, sb.config.today)
        granularity = parse_choice(q, "granularity", ("day", "week"), "day")
        return JSONResponse({"data": sb.views.competitor_trends(brand, window, engine, granularity)})

    # -- audits --------------------------------------------------------------------------------------------

    async def create_audit(request: Request, who: Principal) -> Response:
        if who.workspace.subscription == "trialing":
            raise ApiError("forbidden", "Audits are not available during a trial.")
        body = await _json_body(request)
        url = _required_string(body, "url", 2000)
        brand_id = _required_string(body, "brand_id")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiError("invalid_request", "'url' must be an absolute http(s) URL.")
        if not is_uuid(brand_id):
            raise ApiError("invalid_request", "'brand_id' must be a UUID.")
        brand = sb.brand_for(who, brand_id)
        record = sb.state.create_audit(who.workspace.id, brand, url)
        return JSONResponse({"data": _audit_head(record)}, status_code=202)

    def _audit_head(record: Any) -> dict[str, Any]:
        return {
            "id": record.id,
            "status": "pending",
            "url": record.url,
            "brand_id": record.brand_id,
            "poll": f"/v1/audit-reports/{record.id}",
        }

    def get_audit(request: Request, who: Principal) -> Response:
        audit_id = request.path_params["id"]
        record = sb.state.audit(audit_id) if is_uuid(audit_id) else None
        brand = sb.state.brand(record.brand_id) if record else None
        if record is None or brand is None or not who.reaches(brand):
            raise not_found("Audit report")
        body = _audit_head(record)
        body["created_at"] = iso(record.created_at)
        if sb.state.audit_complete(record):
            body.update(_audit_report(record, sb.config.audit_delay_seconds))
        else:
            body.update(completed_at=None, score=None, findings=None)
        return JSONResponse({"data": body})

    # -- admin ---------------------------------------------------------------------------------------------

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
        return JSONResponse(_config_view(sb))

    async def admin_config(request: Request) -> Response:
        body = await _json_body(request)
        try:
            apply_runtime_config(sb, body)
        except (ValueError, TypeError) as exc:
            raise ApiError("invalid_request", str(exc)) from None
        return JSONResponse(_config_view(sb))

    async def admin_track(request: Request) -> Response:
        body = await _json_body(request)
        brand_id, name = _required_string(body, "brand_id"), _required_string(body, "brand_name")
        brand = sb.state.brand(brand_id) if is_uuid(brand_id) else None
        if brand is None:
            raise not_found("Brand")
        tracking = sb.state.track(brand, name)
        return JSONResponse({"data": sb.views.tracked_row(tracking)}, status_code=201)

    def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document())

    return [
        Route("/v1/brands", api(list_brands), methods=["GET"]),
        Route("/v1/brands", api(create_brand, is_async=True), methods=["POST"]),
        Route("/v1/brands/{id}", api(get_brand), methods=["GET"]),
        Route("/v1/brands/{id}/topics", api(list_topics), methods=["GET"]),
        Route("/v1/brands/{id}/topics", api(create_topic, is_async=True), methods=["POST"]),
        Route("/v1/brands/{id}/topics/{topicId}", api(rename_topic, is_async=True), methods=["PATCH"]),
        Route("/v1/brands/{id}/prompts", api(list_prompts), methods=["GET"]),
        Route("/v1/brands/{id}/answers", api(list_answers), methods=["GET"]),
        Route("/v1/prompts/{id}/mentions", api(list_mentions), methods=["GET"]),
        Route("/v1/brands/{id}/generations", api(list_generations), methods=["GET"]),
        Route("/v1/brands/{id}/generations/{generationId}", api(get_generation), methods=["GET"]),
        Route("/v1/brands/{id}/citations/trends", api(citation_trends), methods=["GET"]),
        Route("/v1/brands/{id}/citations/urls", api(citation_urls), methods=["GET"]),
        Route("/v1/brands/{id}/tracked-competitors", api(list_tracked), methods=["GET"]),
        Route("/v1/brands/{id}/tracked-competitors/{competitorId}", api(untrack), methods=["DELETE"]),
        Route("/v1/brands/{id}/competitors/trends", api(competitor_trends), methods=["GET"]),
        Route("/v1/audit-reports", api(create_audit, is_async=True), methods=["POST"]),
        Route("/v1/audit-reports/{id}", api(get_audit), methods=["GET"]),
        Route("/_sandbox/stats", admin_stats, methods=["GET"]),
        Route("/_sandbox/stats/reset", admin_stats_reset, methods=["POST"]),
        Route("/_sandbox/keys", admin_keys, methods=["GET"]),
        Route("/_sandbox/restate", admin_restate, methods=["POST"]),
        Route("/_sandbox/config", admin_config_get, methods=["GET"]),
        Route("/_sandbox/config", admin_config, methods=["POST"]),
        Route("/_sandbox/track", admin_track, methods=["POST"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]


def _audit_report(record: Any, delay: float) -> dict[str, Any]:
    """The finished report: a score and findings derived from the URL, so they are reproducible."""
    import datetime as dt
    import hashlib

    digest = hashlib.blake2b(record.url.encode(), digest_size=8).digest()
    score = 40 + digest[0] % 56
    checks = [
        ("structured_data", "Add Organization and Product structured data", "high"),
        ("answer_first", "Open with a direct answer to the page's main question", "medium"),
        ("citations", "Cite primary sources that engines already trust", "medium"),
        ("freshness", "Show a visible last-updated date", "low"),
        ("crawlability", "Allow AI crawlers in robots.txt", "high"),
    ]
    findings = [
        {"id": code, "title": title, "severity": severity, "passed": bool(digest[1 + i] % 2)}
        for i, (code, title, severity) in enumerate(checks)
    ]
    return {
        "status": "complete",
        "completed_at": iso(record.created_at + dt.timedelta(seconds=delay)),
        "score": score,
        "findings": findings,
    }


def _config_view(sb: Sandbox) -> dict[str, Any]:
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


# -- middleware ------------------------------------------------------------------------------------


class RequestIdMiddleware:
    """Gives every request an id, sends it as ``X-Request-Id`` on every response, and sets the
    hooks of ``scope["sandbox"]`` (see ``sandbox/routes.py``)."""

    def __init__(self, app: ASGIApp, sb: Sandbox) -> None:
        self.app = app
        self.sb = sb

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4())
        scope["sandbox"] = {
            "restate": self.sb.restate,
            "stats": self.sb.stats,
            "request_id": request_id,
            "template": match_template(scope["method"], scope["path"]),
        }

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


class V1Gate:
    """Sends ``/v1`` through the limits and faults; admin endpoints are never limited or faulted."""

    def __init__(self, router: ASGIApp, sb: Sandbox) -> None:
        self.router = router
        faults = FaultsMiddleware(router, lambda: sb.config.faults)
        self.v1 = LimitsMiddleware(faults, lambda: sb.config.limits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/v1" or path.startswith("/v1/")):
            await self.v1(scope, receive, send)
        else:
            await self.router(scope, receive, send)


def create_app(config: SandboxConfig) -> Starlette:
    """The sandbox as an ASGI app; ``app.state.sandbox`` is the :class:`Sandbox` behind it."""
    sb = Sandbox(config)

    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc.code, exc.message, exc.headers)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            return error_response(
                "method_not_allowed",
                f"{request.method} is not declared for this endpoint.",
                {"Allow": allowed} if allowed else None,
            )
        return error_response("not_found", "No such endpoint.")

    async def on_crash(request: Request, exc: Exception) -> Response:
        rid = request.scope.get("sandbox", {}).get("request_id", "")
        return error_response(
            "internal_error", f"Internal error; quote X-Request-Id {rid} when reporting it."
        )

    app = Starlette(
        routes=build_routes(sb),
        exception_handlers={ApiError: on_api_error, HTTPException: on_http_error, Exception: on_crash},
    )
    app.router.redirect_slashes = False
    app.state.sandbox = sb
    app.add_middleware(
        _Wrap, wrapper=lambda inner: RequestIdMiddleware(sb.stats.middleware(V1Gate(inner, sb)), sb)
    )
    return app


class _Wrap:
    """Adapter that lets ``add_middleware`` install a prebuilt chain around the router."""

    def __init__(self, app: ASGIApp, wrapper: Callable[[ASGIApp], ASGIApp]) -> None:
        self.chain = wrapper(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.chain(scope, receive, send)
