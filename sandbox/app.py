"""The sandbox's ``/v1`` API: request validation and handlers, and ``create_app`` that wires it all.

Endpoint templates and the scope hooks the limits and faults middlewares use are listed in
``sandbox/routes.py``; admin endpoints are in ``admin.py``. The stack (``middleware.py``),
outermost first::

    RequestIdMiddleware   X-Request-Id on every response, hooks in scope["sandbox"]
    StatsMiddleware       counts /v1 requests by template and status
    V1Gate                /v1 -> LimitsMiddleware -> FaultsMiddleware -> router; the rest -> router

Handlers are synchronous functions run on the event loop (after one yield, so requests that arrive
together are all in flight at once and the concurrency limit binds as it would with threads);
injected latency is an async sleep, so slow requests really are in flight at the same time.

Decisions where the spec is silent (also in ``sandbox/README.md``):

- ``403 forbidden``: a trialing workspace may read everything but not order audits
  (``POST /v1/audit-reports``), which spend money.
- ``500 internal_error``: any ``/v1`` request with the header ``X-Sandbox-Fail: 1``, or to an
  endpoint template listed in the runtime setting ``fail_endpoints``.
- A malformed id in a path is a record that does not exist (404); a malformed id in a query
  parameter or body is a bad request (400 ``invalid_request``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sandbox.admin import admin_routes
from sandbox.auth import Principal, authenticate
from sandbox.config import SandboxConfig
from sandbox.encoding import JsonResponse
from sandbox.errors import ApiError, error_response, not_found
from sandbox.instance import Sandbox
from sandbox.middleware import Chain, RequestIdMiddleware, V1Gate
from sandbox.params import (
    is_uuid,
    json_body,
    parse_choice,
    parse_engine,
    parse_limit,
    parse_uuid_param,
    parse_window,
    required_string,
)
from sandbox.routes import FAIL_HEADER, scope_template
from sandbox.state import AuditRecord
from sandbox.world import ENGINES, Brand, iso

logger = logging.getLogger(__name__)

MAX_LIST_LIMIT = 999
MAX_ANSWERS_LIMIT = 100
MAX_CITATION_URLS_LIMIT = 2000


def _as_api_error(request: Request, exc: Exception) -> ApiError:
    """Unexpected failures become the spec's 500, quoting the request id, inside the middleware stack."""
    if isinstance(exc, ApiError):
        return exc
    logger.exception("sandbox handler failed")
    rid = request.scope.get("sandbox", {}).get("request_id", "")
    return ApiError("internal_error", f"Internal error; quote X-Request-Id {rid} when reporting it.")


def v1_routes(sb: Sandbox) -> list[Route]:
    """The /v1 routes of one sandbox (templates as in ``sandbox/routes.py``)."""

    def api(handler: Callable[..., Any], *, is_async: bool = False) -> Callable[[Request], Any]:
        """Authenticate, honour the documented 500 trigger, then run the handler."""

        def check(request: Request) -> Principal:
            template = scope_template(request.scope)
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

        async def run(request: Request) -> Response:
            # On the event loop, not in the thread pool: handing a request to a worker thread and
            # back cost more CPU than most handlers (about 0.35 ms a request). Yielding once first
            # lets requests that arrived together all enter the limits (and hold their concurrency
            # slots) before this one is answered, as they did when each waited for a thread.
            await asyncio.sleep(0)
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
        body = await json_body(request)
        fields: dict[str, Any] = {
            "name": required_string(body, "name"),
            "domain": required_string(body, "domain"),
        }
        for name in ("category", "country"):
            if name in body:
                fields[name] = required_string(body, name)
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
        return JsonResponse({"data": brand.api_row()}, status_code=201)

    def get_brand(request: Request, who: Principal) -> Response:
        return JsonResponse({"data": sb.brand_for(who, request.path_params["id"]).api_row()})

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
        name = required_string(await json_body(request), "name", 200)
        record = sb.state.create_topic(brand, name)
        return JsonResponse({"data": sb.views.topic_row(brand, record)}, status_code=201)

    async def rename_topic(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        topic_id = request.path_params["topicId"]
        if not is_uuid(topic_id):
            raise not_found("Topic")
        name = required_string(await json_body(request), "name", 200)
        record = sb.state.rename_topic(brand, topic_id, name)
        return JsonResponse({"data": sb.views.topic_row(brand, record)})

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
        return JsonResponse(
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
                return JsonResponse({"data": sb.views.generation_row(generation, full=True)})
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
        return JsonResponse({"data": sb.views.citation_trend(brand, window, engine, topic_id, domain, url)})

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
        return JsonResponse(sb.views.citation_urls(brand, window, engine, topic_id, limit))

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
        return JsonResponse(
            {"data": {"id": tracking.competitor_id, "brand_name": tracking.member.name, "untracked": True}}
        )

    def competitor_trends(request: Request, who: Principal) -> Response:
        brand = sb.brand_for(who, request.path_params["id"])
        q = request.query_params
        engine = parse_engine(q)
        window = parse_window(q, sb.config.today)
        granularity = parse_choice(q, "granularity", ("day", "week"), "day")
        return JsonResponse({"data": sb.views.competitor_trends(brand, window, engine, granularity)})

    # -- audits --------------------------------------------------------------------------------------------

    async def create_audit(request: Request, who: Principal) -> Response:
        if who.workspace.subscription == "trialing":
            raise ApiError("forbidden", "Audits are not available during a trial.")
        body = await json_body(request)
        url = required_string(body, "url", 2000)
        brand_id = required_string(body, "brand_id")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiError("invalid_request", "'url' must be an absolute http(s) URL.")
        if not is_uuid(brand_id):
            raise ApiError("invalid_request", "'brand_id' must be a UUID.")
        brand = sb.brand_for(who, brand_id)
        record = sb.state.create_audit(who.workspace.id, brand, url)
        return JsonResponse({"data": _audit_head(record)}, status_code=202)

    def _audit_head(record: AuditRecord) -> dict[str, Any]:
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
        return JsonResponse({"data": body})

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
    ]


def _audit_report(record: AuditRecord, delay: float) -> dict[str, Any]:
    """The finished report: a score and findings derived from the URL, so they are reproducible."""
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
        routes=[*v1_routes(sb), *admin_routes(sb)],
        exception_handlers={ApiError: on_api_error, HTTPException: on_http_error, Exception: on_crash},
    )
    app.router.redirect_slashes = False
    app.state.sandbox = sb
    app.add_middleware(
        Chain, wrapper=lambda inner: RequestIdMiddleware(sb.stats.middleware(V1Gate(inner, sb)), sb)
    )
    return app
