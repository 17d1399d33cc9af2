"""The OpenAPI 3.1 document of the v1 API, as the spec states it plus DESIGN.md's assumptions.

Users generate clients and validate their mocks from it, and the sandbox is property-tested against
it, so it follows the spec to the letter: field names and types, nullability only where the spec
allows null, the error codes of each status, and the headers DESIGN.md names. Objects stay open
(no ``additionalProperties: false``): the service may add fields and clients must keep them.

Where the spec is silent, the document takes DESIGN.md's assumptions (prompt, topic, answer and
audit-report endpoints, ``topic_id``, success codes 200/201/202) and the sandbox's own choices
(``POST /v1/brands`` body, single-generation fetch), each marked in its description.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from sandbox.routes import SPENDING_ENDPOINTS
from sandbox.world import ENGINES

Schema = dict[str, Any]


#: Error codes by HTTP status, from the spec's Errors table.
ERROR_CODES: dict[int, tuple[str, ...]] = {
    400: ("missing_parameter", "invalid_request", "invalid_engine", "invalid_date"),
    401: ("missing_api_key", "invalid_api_key"),
    402: ("subscription_required",),
    403: ("plan_not_eligible", "forbidden", "brand_scope_forbidden"),
    404: ("not_found",),
    405: ("method_not_allowed",),
    429: ("rate_limited", "quota_exceeded", "endpoint_rate_limited", "concurrency_limited"),
    500: ("internal_error",),
}
_ERROR_DESCRIPTIONS = {
    400: "Bad request: a missing or invalid parameter, engine, date or body.",
    401: "No Authorization header, or the key is unknown or revoked.",
    402: "The workspace's subscription is inactive or past due.",
    403: "The plan has no API access, or the key may not do this.",
    404: "The record does not exist, belongs to another workspace, or is outside the key's scope.",
    429: "A limit was hit; the code names which. Retry after `Retry-After` (except `quota_exceeded`).",
    500: "Internal error; quote the X-Request-Id when reporting it.",
}
#: Statuses every operation may answer (the spec lists them for competitor trends; DESIGN.md and the
#: sandbox apply them to every endpoint).
_ERROR_STATUSES = (400, 401, 402, 403, 404, 429, 500)


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Schema], required: list[str] | None = None, description: str = "") -> Schema:
    schema: Schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }
    if description:
        schema["description"] = description
    return schema


def _nullable(schema: Schema) -> Schema:
    return {**schema, "type": [schema["type"], "null"]}


_UUID: Schema = {"type": "string", "format": "uuid"}
_DATE: Schema = {"type": "string", "format": "date"}
_DATETIME: Schema = {"type": "string", "format": "date-time"}
_STR: Schema = {"type": "string"}
_INT: Schema = {"type": "integer"}
_NUM: Schema = {"type": "number"}
_BOOL: Schema = {"type": "boolean"}
_RATE: Schema = {"type": "number", "minimum": 0, "maximum": 100}
_HTTP_URL: Schema = {
    "type": "string",
    "pattern": r"^https?://[A-Za-z0-9.-]+(/.*)?$",
    "description": "An absolute http(s) URL.",
}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def _metrics_properties() -> dict[str, Schema]:
    return {
        "responses_answered": {**_INT, "minimum": 0},
        "responses_with_brand": {**_INT, "minimum": 0},
        "mention_count": {**_INT, "minimum": 0},
        "citation_count": {
            **_INT,
            "minimum": 0,
            "description": "Citations of this entity's own website in the same answers.",
        },
        "detection_rate": {**_RATE, "description": "Share of answers that mention the brand."},
        "visibility_score": {**_RATE, "description": "Detection weighted by position and top-3 share."},
        "avg_position": _nullable(_NUM),
        "avg_sentiment": _nullable(_NUM),
        "top3_visibility": _nullable(_NUM),
        "win_rate": {**_RATE, "description": "Share of answers where the brand is named first."},
        "share_of_voice": {**_RATE, "description": "Over the brand plus its tracked competitors."},
    }


def _schemas() -> dict[str, Schema]:
    generation_summary = {
        "id": _UUID,
        "brand_id": _UUID,
        "content_type": {**_STR, "description": "A value such as `blog_post` occurs."},
        "status": {**_STR, "description": "A value such as `generating_brief` occurs."},
        "topic": _STR,
        "title": _STR,
        "source_recommendation_id": _UUID,
        "created_at": _DATETIME,
        "updated_at": _DATETIME,
    }
    generation_full = {
        **generation_summary,
        "slug": _STR,
        "meta_title": _STR,
        "meta_description": _STR,
        "brief_md": {**_STR, "description": "Markdown."},
        "draft_md": {**_STR, "description": "Markdown."},
    }
    return {
        "Engine": {
            "type": "string",
            "enum": list(ENGINES),
            "description": "Stable public engine identifiers.",
        },
        "Error": _obj(
            {
                "error": _obj(
                    {
                        "code": {
                            **_STR,
                            "description": "Stable machine code; match on it, never on message.",
                        },
                        "message": _STR,
                    }
                )
            }
        ),
        "Brand": _obj(
            {
                "id": _UUID,
                "name": _STR,
                "domain": _STR,
                "category": _STR,
                "aliases": _array(_STR),
                "engines": _array(_ref("Engine")),
                "country": _STR,
                "created_at": _DATETIME,
            }
        ),
        "BrandCreate": _obj(
            {
                "name": {**_STR, "minLength": 1},
                "domain": {**_STR, "minLength": 1},
                "category": _STR,
                "aliases": _array(_STR),
                "engines": _array(_ref("Engine")),
                "country": _STR,
            },
            required=["name", "domain"],
            description="Assumed body of brand creation (not shown by the spec).",
        ),
        "Topic": _obj(
            {
                "id": _UUID,
                "name": _STR,
                "prompt_count": {**_INT, "minimum": 0},
                "created_at": _DATETIME,
                "updated_at": _DATETIME,
            }
        ),
        "TopicWrite": _obj({"name": {**_STR, "minLength": 1}}),
        "Prompt": _obj(
            {"id": _UUID, "text": _STR, "topic_id": _nullable(_UUID), "created_at": _DATETIME},
            description="Assumed row of the prompt list (DESIGN.md).",
        ),
        "Answer": _obj(
            {"id": _UUID, "prompt_id": _UUID, "engine": _ref("Engine"), "checked_on": _DATE},
            description="Assumed row of the answer list (DESIGN.md); further fields may occur.",
        ),
        "PromptMention": _obj(
            {
                "id": _UUID,
                "response_id": {**_UUID, "description": "The id of a row of the answers endpoint."},
                "brand_name": {**_STR, "description": "Includes brands that are not the caller's."},
                "position": _NUM,
                "sentiment": _NUM,
                "prompt_id": _UUID,
                "engine": _ref("Engine"),
                "checked_on": _DATE,
            }
        ),
        "GenerationSummary": _obj(
            generation_summary,
            description="List row: brief_md, draft_md, slug, meta_title and meta_description are omitted.",
        ),
        "Generation": _obj(generation_full, description="Single-record fetch (assumed path)."),
        "AuditReportCreated": _obj(
            {
                "id": _UUID,
                "status": {**_STR, "description": "`pending` on creation; `complete` when ready."},
                "url": _STR,
                "brand_id": _UUID,
                "poll": {**_STR, "description": "Path to poll for the report."},
            }
        ),
        "AuditReportCreate": _obj({"url": _HTTP_URL, "brand_id": _UUID}),
        "AuditReport": _obj(
            {
                "id": _UUID,
                "status": {**_STR, "description": "`pending`, then `complete`."},
                "url": _STR,
                "brand_id": _UUID,
            },
            description="Assumed body of the poll path (DESIGN.md); a finished report adds fields.",
        ),
        "TrackedCompetitor": _obj(
            {
                "id": _UUID,
                "brand_name": _STR,
                "aliases": _array(_STR),
                "domains": _array(_STR),
                "history_from": {
                    **_nullable(_DATE),
                    "description": "Earliest date with complete history; null while the backfill runs.",
                },
                "tracked_since": _DATETIME,
            }
        ),
        "UntrackResult": _obj({"id": _UUID, "brand_name": _STR, "untracked": _BOOL}),
        "CompetitorTrendMetrics": _obj(_metrics_properties()),
        "CompetitorTrendPoint": _obj(
            {
                "date": {**_DATE, "description": "Bucket start: the day, or the Monday of the week."},
                **_metrics_properties(),
            }
        ),
        "CompetitorTrendEntity": _obj(
            {
                "id": {
                    **_nullable(_UUID),
                    "description": "Tracked competitor id; null for the brand itself.",
                },
                "brand_name": _STR,
                "is_your_brand": _BOOL,
                "domains": _array(_STR),
                "history_from": _nullable(_DATE),
                "totals": _ref("CompetitorTrendMetrics"),
                "series": _array(_ref("CompetitorTrendPoint")),
            }
        ),
        "CompetitorTrend": _obj(
            {
                "granularity": {"type": "string", "enum": ["day", "week"]},
                "from": _DATE,
                "to": _DATE,
                "engine": {
                    "anyOf": [_ref("Engine"), {"type": "null"}],
                    "description": "Null for the all-engine rollup.",
                },
                "brand": _ref("CompetitorTrendEntity"),
                "competitors": _array(_ref("CompetitorTrendEntity")),
            }
        ),
        "CitationTrend": _obj(
            {
                "target": _obj(
                    {
                        "type": {**_STR, "description": "`domain` occurs."},
                        "value": _STR,
                        "is_own_domain": _BOOL,
                    }
                ),
                "series": _array(
                    _obj(
                        {
                            "date": _DATE,
                            "citations": {**_INT, "minimum": 0},
                            "avg_position": _NUM,
                            "brand_total_citations": {**_INT, "minimum": 0},
                            "share": _NUM,
                        },
                        description="Days the brand did not run are omitted; days without the target are 0.",
                    )
                ),
                "summary": _obj(
                    {
                        "citations": {**_INT, "minimum": 0},
                        "avg_position": _NUM,
                        "share": _NUM,
                        "brand_total_citations": {**_INT, "minimum": 0},
                        "change": _obj({"absolute": _NUM, "percentage": _NUM}),
                    }
                ),
            }
        ),
        "CitedPage": _obj(
            {
                "url": _STR,
                "domain": _STR,
                "root_domain": _STR,
                "citation_count": {**_INT, "minimum": 0},
                "avg_position": _NUM,
                "citation_share": _NUM,
            }
        ),
    }


def _page_envelope(item: str) -> Schema:
    return _obj({"data": _array(_ref(item)), "has_more": _BOOL, "next_cursor": _nullable(_STR)})


def _complete_set_envelope(item: str, *, citations: bool) -> Schema:
    properties: dict[str, Schema] = {
        "data": _array(_ref(item)),
        "has_more": {"type": "boolean", "const": False},
        "next_cursor": {"type": "null"},
        "total_count": {**_INT, "minimum": 0, "description": "Rows matched before the limit."},
    }
    if citations:
        properties["total_citations"] = {
            **_INT,
            "minimum": 0,
            "description": "Total across all matching rows: the denominator of citation_share.",
        }
    properties["capped"] = {**_BOOL, "description": "True when total_count exceeds the rows returned."}
    return _obj(properties)


def _data(item: str) -> Schema:
    return _obj({"data": _ref(item)})


# -- parameters -------------------------------------------------------------------------------------


def _path(name: str, description: str) -> Schema:
    return {"name": name, "in": "path", "required": True, "description": description, "schema": _UUID}


def _query(name: str, schema: Schema, description: str) -> Schema:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


_BRAND = _path("id", "Brand id.")
_ENGINE = _query("engine", _ref("Engine"), "Restrict to one engine; omit for the all-engine rollup.")
_FROM = _query("from", _DATE, "Inclusive start; defaults to 30 days before `to`.")
_TO = _query("to", _DATE, "Exclusive end; defaults to tomorrow.")
_CURSOR = _query("cursor", _STR, "Opaque cursor copied from the previous page's `next_cursor`.")
_TOPIC = _query("topic_id", _UUID, "Restrict to prompts in one topic (assumed name, DESIGN.md).")


def _limit(maximum: int, description: str = "Rows per page or rows to return.") -> Schema:
    schema = {"type": "integer", "minimum": 1, "maximum": maximum, "default": min(100, maximum)}
    return _query("limit", schema, description)


# -- responses --------------------------------------------------------------------------------------


_NAMES_BY_STATUS = {
    400: "BadRequest",
    401: "Unauthorized",
    402: "PaymentRequired",
    403: "Forbidden",
    404: "NotFound",
    429: "TooManyRequests",
    500: "InternalError",
}
_SECONDS: Schema = {"type": "string", "pattern": "^[0-9]+$"}
_RATE_HEADERS = ("X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
_ENDPOINT_HEADERS = ("X-Endpoint-Limit", "X-Endpoint-Remaining", "X-Endpoint-Reset")


def _header(description: str, schema: Schema, required: bool = True) -> Schema:
    return {"description": description, "required": required, "schema": schema}


def _headers() -> dict[str, Schema]:
    """Header names are DESIGN.md's assumptions; values are whole seconds or counts."""
    return {
        "X-Request-Id": _header("Id of this request; quote it when reporting an error.", _STR),
        "X-RateLimit-Limit": _header("Capacity of the caller's request bucket.", _SECONDS),
        "X-RateLimit-Remaining": _header("Requests left in the bucket now.", _SECONDS),
        "X-RateLimit-Reset": _header("Seconds until the bucket is full again.", _SECONDS),
        "X-Endpoint-Limit": _header("Requests allowed per window on this endpoint.", _SECONDS),
        "X-Endpoint-Remaining": _header("Requests left in the current window.", _SECONDS),
        "X-Endpoint-Reset": _header("Seconds until the window reopens.", _SECONDS),
        "Retry-After": _header("Seconds (or an HTTP date) to wait before retrying.", _STR, required=False),
    }


def _header_refs(spending: bool, retry_after: bool = False) -> dict[str, Schema]:
    names = [
        *_RATE_HEADERS,
        *(_ENDPOINT_HEADERS if spending else ()),
        *(("Retry-After",) if retry_after else ()),
    ]
    return {name: {"$ref": f"#/components/headers/{name}"} for name in names}


def _error_schemas() -> dict[str, Schema]:
    """One schema per status, narrowing ``error.code`` to the codes the spec lists for it."""
    return {
        f"Error{status}": {
            "allOf": [
                _ref("Error"),
                _obj({"error": _obj({"code": {"type": "string", "enum": list(codes)}}, ["code"])}),
            ]
        }
        for status, codes in ERROR_CODES.items()
    }


def _error_responses() -> dict[str, Schema]:
    """Every error answer, in a plain and a spending-endpoint variant (which adds ``X-Endpoint-*``)."""
    out: dict[str, Schema] = {}
    for status, name in _NAMES_BY_STATUS.items():
        codes = ", ".join(f"`{c}`" for c in ERROR_CODES[status])
        for spending in (False, True):
            out[name + ("OnSpendingEndpoint" if spending else "")] = {
                "description": f"{_ERROR_DESCRIPTIONS[status]} Codes: {codes}.",
                "headers": _header_refs(spending, retry_after=status == 429),
                "content": {"application/json": {"schema": _ref(f"Error{status}")}},
            }
    return out


def _operation(
    method: str,
    template: str,
    operation_id: str,
    summary: str,
    payload: Schema,
    *,
    status: int = 200,
    parameters: tuple[Schema, ...] = (),
    body: str | None = None,
    description: str = "",
) -> Schema:
    spending = f"{method.upper()} {template}" in SPENDING_ENDPOINTS
    responses: dict[str, Schema] = {
        str(status): {
            "description": "Success.",
            "headers": _header_refs(spending),
            "content": {"application/json": {"schema": payload}},
        }
    }
    for error_status in _ERROR_STATUSES:
        name = _NAMES_BY_STATUS[error_status] + ("OnSpendingEndpoint" if spending else "")
        responses[str(error_status)] = {"$ref": f"#/components/responses/{name}"}
    operation: Schema = {
        "operationId": operation_id,
        "summary": summary,
        "parameters": list(parameters),
        "responses": responses,
    }
    if description or spending:
        notes = [description] if description else []
        if spending:
            notes.append("Spends money: carries `X-Endpoint-*` headers and a per-endpoint limit.")
        operation["description"] = " ".join(notes)
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    return operation


def _paths() -> dict[str, dict[str, Schema]]:
    mentions_params = (_path("id", "Prompt id."), _ENGINE, _FROM, _TO, _limit(999), _CURSOR)
    return {
        "/v1/brands": {
            "get": _operation(
                "GET",
                "/v1/brands",
                "listBrands",
                "Brands the key can reach, with their engines and country.",
                _page_envelope("Brand"),
                parameters=(_limit(999), _CURSOR),
                description="The cheapest validity check: a 200 means the key is valid and the "
                "subscription active.",
            ),
            "post": _operation(
                "POST",
                "/v1/brands",
                "createBrand",
                "Create a brand (workspace keys only).",
                _data("Brand"),
                status=201,
                body="BrandCreate",
                description="Named by the spec, not shown: body and status are the sandbox's assumption. "
                "A brand-scoped key gets 403 `brand_scope_forbidden`.",
            ),
        },
        "/v1/brands/{id}": {
            "get": _operation(
                "GET", "/v1/brands/{id}", "getBrand", "One brand.", _data("Brand"), parameters=(_BRAND,)
            )
        },
        "/v1/brands/{id}/topics": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/topics",
                "listTopics",
                "Topics of a brand (assumed, DESIGN.md).",
                _page_envelope("Topic"),
                parameters=(_BRAND, _limit(999), _CURSOR),
            ),
            "post": _operation(
                "POST",
                "/v1/brands/{id}/topics",
                "createTopic",
                "Create a topic.",
                _data("Topic"),
                status=201,
                parameters=(_BRAND,),
                body="TopicWrite",
            ),
        },
        "/v1/brands/{id}/topics/{topicId}": {
            "patch": _operation(
                "PATCH",
                "/v1/brands/{id}/topics/{topicId}",
                "renameTopic",
                "Rename a topic; prompts filed under it are unaffected.",
                _data("Topic"),
                parameters=(_BRAND, _path("topicId", "Topic id.")),
                body="TopicWrite",
            )
        },
        "/v1/brands/{id}/prompts": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/prompts",
                "listPrompts",
                "Prompts of a brand (assumed, DESIGN.md).",
                _page_envelope("Prompt"),
                parameters=(_BRAND, _limit(999), _CURSOR),
            )
        },
        "/v1/brands/{id}/answers": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/answers",
                "listAnswers",
                "Answers engines returned to the brand's prompts (assumed, DESIGN.md).",
                _page_envelope("Answer"),
                parameters=(_BRAND, _ENGINE, _FROM, _TO, _limit(100, "Page size, capped at 100."), _CURSOR),
            )
        },
        "/v1/prompts/{id}/mentions": {
            "get": _operation(
                "GET",
                "/v1/prompts/{id}/mentions",
                "listPromptMentions",
                "Every brand named in answers to the prompt, the caller's or not.",
                _page_envelope("PromptMention"),
                parameters=mentions_params,
            )
        },
        "/v1/brands/{id}/generations": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/generations",
                "listGenerations",
                "Generations, newest first: a complete set that `limit` truncates; check `capped`.",
                _complete_set_envelope("GenerationSummary", citations=False),
                parameters=(_BRAND, _limit(999, "Rows to return; truncates the complete set.")),
            )
        },
        "/v1/brands/{id}/generations/{generationId}": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/generations/{generationId}",
                "getGeneration",
                "One generation with its Markdown (assumed path).",
                _data("Generation"),
                parameters=(_BRAND, _path("generationId", "Generation id.")),
            )
        },
        "/v1/brands/{id}/citations/trends": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/citations/trends",
                "getCitationTrend",
                "Citations of one domain or page over time.",
                _data("CitationTrend"),
                parameters=(
                    _BRAND,
                    _query("domain", _STR, "A root domain; subdomains roll up. Exclusive with `url`."),
                    _query("url", _HTTP_URL, "One exact page. Exclusive with `domain`."),
                    _ENGINE,
                    _TOPIC,
                    _FROM,
                    _TO,
                ),
                description="With neither `domain` nor `url`, the brand's own domain is trended; both give "
                "400 `invalid_request` (assumed, DESIGN.md).",
            )
        },
        "/v1/brands/{id}/citations/urls": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/citations/urls",
                "listCitedPages",
                "Most-cited pages over the window, ranked by citation count; top-N, no paging.",
                _complete_set_envelope("CitedPage", citations=True),
                parameters=(_BRAND, _ENGINE, _TOPIC, _FROM, _TO, _limit(2000, "Rows to return (top N).")),
            )
        },
        "/v1/brands/{id}/tracked-competitors": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/tracked-competitors",
                "listTrackedCompetitors",
                "The set share of voice and trends are computed over.",
                _page_envelope("TrackedCompetitor"),
                parameters=(_BRAND,),
            )
        },
        "/v1/brands/{id}/tracked-competitors/{competitorId}": {
            "delete": _operation(
                "DELETE",
                "/v1/brands/{id}/tracked-competitors/{competitorId}",
                "untrackCompetitor",
                "Remove a competitor from the tracked set; its mentions are kept.",
                _data("UntrackResult"),
                parameters=(_BRAND, _path("competitorId", "Tracked competitor id.")),
            )
        },
        "/v1/brands/{id}/competitors/trends": {
            "get": _operation(
                "GET",
                "/v1/brands/{id}/competitors/trends",
                "getCompetitorTrends",
                "The brand and each tracked competitor over time, from precomputed daily rows.",
                _data("CompetitorTrend"),
                parameters=(
                    _BRAND,
                    _ENGINE,
                    _FROM,
                    _TO,
                    _query("granularity", {"type": "string", "enum": ["day", "week"]}, "Default `day`."),
                ),
            )
        },
        "/v1/audit-reports": {
            "post": _operation(
                "POST",
                "/v1/audit-reports",
                "createAuditReport",
                "Audit one URL for AI search; returns at once with `pending` and a `poll` path.",
                _data("AuditReportCreated"),
                status=202,
                body="AuditReportCreate",
            )
        },
        "/v1/audit-reports/{id}": {
            "get": _operation(
                "GET",
                "/v1/audit-reports/{id}",
                "getAuditReport",
                "The poll path of an audit (assumed, DESIGN.md): poll until `status` is `complete`.",
                _data("AuditReport"),
                parameters=(_path("id", "Audit report id."),),
            )
        },
    }


def _document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Brand AI-Search Visibility API",
            "version": "1.0.0",
            "description": "The v1 API as served by the local sandbox. Every request carries "
            "`Authorization: Bearer <API_KEY>`; every body is JSON. A method an endpoint does not "
            "declare returns 405 `method_not_allowed`.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A workspace key or a brand-scoped key.",
                }
            },
            "schemas": {**_schemas(), **_error_schemas()},
            "responses": _error_responses(),
            "headers": _headers(),
        },
    }


@cache
def _cached() -> dict[str, Any]:
    return _document()


def openapi_document() -> dict[str, Any]:
    """The document (a fresh copy: callers may mutate it, e.g. to set ``servers``)."""
    return copy.deepcopy(_cached())
