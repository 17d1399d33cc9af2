"""Every endpoint the client calls, with the shapes it relies on, in one place.

The spec leaves some endpoints and fields out (DESIGN.md, "Assumptions where the spec is silent"):
the prompt, topic and answer lists, the audit poll, the topic filter's name. Their assumed shapes
live here and nowhere else, so that when the service documents them, one module changes.

Validation is deliberately narrow: only the fields the project keys on or partitions by are
required (present, non-null, of the right JSON type). Every other field may be missing or null,
and unknown fields are kept, so the service can add fields without breaking a sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from resources.api.errors import ResponseShapeError

Kind = Literal["string", "integer", "number", "boolean", "array", "object"]

#: The spec's Engine enumeration: stable public identifiers, in the spec's order.
ENGINES: tuple[str, ...] = (
    "chatgpt",
    "claude",
    "perplexity",
    "gemini",
    "google_ai_overviews",
    "google_ai_mode",
    "copilot",
)

#: Page size bounds per the spec's Limits section (and DESIGN.md for the assumed answer list).
MAX_LIMIT_PAGING = 999
MAX_LIMIT_ANSWERS = 100
MAX_LIMIT_CITATION_URLS = 2000

#: The citation endpoints' topic filter (the spec does not name it; DESIGN.md assumes ``topic_id``).
TOPIC_FILTER_PARAM = "topic_id"


def _is_kind(value: Any, kind: Kind) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


@dataclass(frozen=True)
class Endpoint:
    """One endpoint: method, path template, and the fields required in each row (or the object)."""

    method: str
    template: str
    #: ``path -> kind``; ``a.b`` reaches into an object, ``a[].b`` into every element of an array.
    required: Mapping[str, Kind] = field(default_factory=dict)
    #: True when ``data`` is an array of rows (paging and complete sets), False for one object.
    rows: bool = False

    @property
    def key(self) -> str:
        """The name counters and errors use: method plus template, never a concrete id."""
        return f"{self.method} {self.template}"

    def path(self, **params: str) -> str:
        """The concrete path; ids are percent-encoded so no value can escape its path segment."""
        return self.template.format(**{k: quote(str(v), safe="") for k, v in params.items()})

    def validate(self, obj: Any, *, request_id: str | None = None) -> dict[str, Any]:
        """Return ``obj`` unchanged, or raise ``ResponseShapeError`` naming the endpoint and field."""
        what = "row" if self.rows else "object 'data'"
        if not isinstance(obj, dict):
            raise ResponseShapeError(
                f"{what} must be an object, got {_json_kind(obj)}",
                endpoint=self.key,
                request_id=request_id,
            )
        for path, kind in self.required.items():
            _check_path(obj, path.replace("[]", ".[]").split("."), kind, "", self.key, request_id)
        return obj


def _check_path(
    value: Any, parts: list[str], kind: Kind, where: str, endpoint: str, request_id: str | None
) -> None:
    head, rest = parts[0], parts[1:]
    if head == "[]":
        if not isinstance(value, list):
            return  # the array itself is validated by its own entry
        for index, item in enumerate(value):
            _check_path(item, rest, kind, f"{where}[{index}]", endpoint, request_id)
        return
    if not isinstance(value, dict):
        raise ResponseShapeError(
            f"field '{where}' must be an object, got {_json_kind(value)}",
            endpoint=endpoint,
            request_id=request_id,
        )
    name = f"{where}.{head}" if where else head
    if head not in value or value[head] is None:
        if not rest:
            raise ResponseShapeError(
                f"required field '{name}' is missing or null (expected {kind})",
                endpoint=endpoint,
                request_id=request_id,
            )
        return  # the parent's own entry reports it
    if not rest:
        if not _is_kind(value[head], kind):
            raise ResponseShapeError(
                f"required field '{name}' must be {kind}, got {_json_kind(value[head])}",
                endpoint=endpoint,
                request_id=request_id,
            )
        return
    _check_path(value[head], rest, kind, name, endpoint, request_id)


# --- Documented endpoints (SERVICE_SPEC.md, "Endpoint table") -----------------------------------

LIST_BRANDS = Endpoint("GET", "/v1/brands", {"id": "string", "name": "string"}, rows=True)
GET_BRAND = Endpoint("GET", "/v1/brands/{id}", {"id": "string", "name": "string"})
CREATE_TOPIC = Endpoint("POST", "/v1/brands/{id}/topics", {"id": "string", "name": "string"})
RENAME_TOPIC = Endpoint("PATCH", "/v1/brands/{id}/topics/{topicId}", {"id": "string", "name": "string"})
LIST_PROMPT_MENTIONS = Endpoint(
    "GET",
    "/v1/prompts/{id}/mentions",
    {"id": "string", "engine": "string", "checked_on": "string"},
    rows=True,
)
LIST_GENERATIONS = Endpoint("GET", "/v1/brands/{id}/generations", {"id": "string"}, rows=True)
CITATION_TRENDS = Endpoint(
    "GET",
    "/v1/brands/{id}/citations/trends",
    {
        "target": "object",
        "target.type": "string",
        "target.value": "string",
        "series": "array",
        "series[].date": "string",
    },
)
CITATION_URLS = Endpoint(
    "GET", "/v1/brands/{id}/citations/urls", {"url": "string", "citation_count": "integer"}, rows=True
)
LIST_TRACKED_COMPETITORS = Endpoint(
    "GET",
    "/v1/brands/{id}/tracked-competitors",
    {"id": "string", "brand_name": "string"},
    rows=True,
)
UNTRACK_COMPETITOR = Endpoint(
    "DELETE",
    "/v1/brands/{id}/tracked-competitors/{competitorId}",
    {"id": "string", "untracked": "boolean"},
)
COMPETITOR_TRENDS = Endpoint(
    "GET",
    "/v1/brands/{id}/competitors/trends",
    {
        "brand": "object",
        "brand.brand_name": "string",
        "brand.series": "array",
        "brand.series[].date": "string",
        "competitors": "array",
        "competitors[].brand_name": "string",
        "competitors[].series": "array",
        "competitors[].series[].date": "string",
    },
)
CREATE_AUDIT = Endpoint("POST", "/v1/audit-reports", {"id": "string", "status": "string", "poll": "string"})

# --- Assumed endpoints (DESIGN.md, "Assumptions where the spec is silent") ----------------------

LIST_TOPICS = Endpoint("GET", "/v1/brands/{id}/topics", {"id": "string", "name": "string"}, rows=True)
LIST_PROMPTS = Endpoint("GET", "/v1/brands/{id}/prompts", {"id": "string"}, rows=True)
LIST_ANSWERS = Endpoint(
    "GET",
    "/v1/brands/{id}/answers",
    {"id": "string", "engine": "string", "checked_on": "string"},
    rows=True,
)
#: Polled on the creation response's ``poll`` path; the template only names it in counters.
POLL_AUDIT = Endpoint("GET", "/v1/audit-reports/{id}", {"id": "string", "status": "string"})

ALL_ENDPOINTS: tuple[Endpoint, ...] = (
    LIST_BRANDS,
    GET_BRAND,
    LIST_TOPICS,
    CREATE_TOPIC,
    RENAME_TOPIC,
    LIST_PROMPTS,
    LIST_ANSWERS,
    LIST_PROMPT_MENTIONS,
    LIST_GENERATIONS,
    CITATION_TRENDS,
    CITATION_URLS,
    LIST_TRACKED_COMPETITORS,
    UNTRACK_COMPETITOR,
    COMPETITOR_TRENDS,
    CREATE_AUDIT,
    POLL_AUDIT,
)
