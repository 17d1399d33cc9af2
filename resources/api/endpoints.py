"""Every endpoint the client calls, with the shapes it relies on, in one place.

The shapes the spec leaves out (DESIGN.md, "Assumptions where the spec is silent") live here and
nowhere else. ``required`` fields (keys, partitions) must be present, non-null and of their JSON type;
``typed`` fields may be missing or null, but another type (a string count, a 2**70 integer) stops
the sync before anything is written. Unknown fields are kept unchecked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Annotated, Any, Literal
from urllib.parse import quote

import msgspec

from resources.api.errors import ResponseShapeError
from resources.api.redaction import excerpt, sanitize

Kind = Literal["string", "integer", "number", "boolean", "array", "object", "strings"]

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
ENGINE_SET: frozenset[str] = frozenset(ENGINES)
#: The all-engine rollup (the API's answer when ``engine`` is omitted), as the tables and the
#: partitions name it: the ``engine`` of its rows and the partition key's engine.
ALL = "all"
ENGINES_WITH_ALL: tuple[str, ...] = (*ENGINES, ALL)


def engine_groups(selected: Sequence[str], order: Sequence[str]) -> list[tuple[str, str]]:
    """Selected engines as contiguous ``(first, last)`` spans of ``order``: one run range each."""
    wanted = [e for e in order if e in set(selected)]
    spans: list[tuple[str, str]] = []
    previous = -2
    for engine in wanted:
        index = order.index(engine)
        if spans and index == previous + 1:
            spans[-1] = (spans[-1][0], engine)
        else:
            spans.append((engine, engine))
        previous = index
    return spans


#: Page size bounds per the spec's Limits section (and DESIGN.md for the assumed answer list).
MAX_LIMIT_PAGING = 999
MAX_LIMIT_ANSWERS = 100
MAX_LIMIT_CITATION_URLS = 2000

#: The citation endpoints' topic filter (the spec does not name it; DESIGN.md assumes ``topic_id``).
TOPIC_FILTER_PARAM = "topic_id"

#: The range of the warehouse's BIGINT: an integer outside it is refused with its field named.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: The largest magnitude a DOUBLE holds.
_FLOAT_MAX = 1.7976931348623157e308


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def valid_int64(value: Any) -> bool:
    return _is_integer(value) and INT64_MIN <= value <= INT64_MAX


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": valid_int64,
    "number": lambda v: isinstance(v, float) or (_is_integer(v) and -_FLOAT_MAX <= v <= _FLOAT_MAX),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "strings": lambda v: isinstance(v, list) and all(isinstance(item, str) for item in v),
}

#: What msgspec checks a scalar field against when a page is validated at once (in C): what the
#: field's check accepts, or less (an integer beyond 64 bits in a number: the loop decides).
#: msgspec's ``float`` also takes a ``Decimal``, which no check accepts: number fields are first
#: checked to hold only ``_NUMBER_TYPES``.
_INT64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
_PAGE_TYPES: dict[str, Any] = {"string": str, "integer": _INT64, "number": _INT64 | float, "boolean": bool}
_NUMBER_TYPES = frozenset({int, float, type(None)})


def _page_type(flat: list[tuple[str, Kind, bool]]) -> Any | None:
    """The msgspec type of a page whose rows (dicts) pass every flat field's check (an optional one
    may be missing or null), or None when a field's kind has no exact msgspec type (arrays, objects,
    lists of strings: msgspec would take a tuple). Built now, in this thread: two threads using a new
    struct type at once can crash msgspec (``tests/api/test_msgspec_threads.py``)."""
    if any(kind not in _PAGE_TYPES for _, kind, _ in flat):
        return None
    struct_fields = [
        (f"f{i}", _PAGE_TYPES[kind]) if required else (f"f{i}", _PAGE_TYPES[kind] | None, None)
        for i, (_, kind, required) in enumerate(flat)
    ]
    rename = {f"f{i}": name for i, (name, _, _) in enumerate(flat)}
    row = msgspec.defstruct("Row", struct_fields, rename=rename, gc=False)
    page_type = list[row]  # type: ignore[valid-type]
    msgspec.convert([], page_type)
    return page_type


#: JSON type names by Python type, the first match wins (``bool`` before ``int``).
_JSON_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"),
    (bool, "boolean"),
    ((int, float), "number"),
    (str, "string"),
    ((list, tuple), "array"),
    (dict, "object"),
)


def json_kind(value: Any) -> str:
    """The JSON type name of a decoded value, for error messages ("number", "string", ...)."""
    return next((name for types, name in _JSON_KINDS if isinstance(value, types)), type(value).__name__)


def _wrong(
    name: str, kind: Kind, value: Any, endpoint: str, request_id: str | None, row: Any = None
) -> ResponseShapeError:
    """The error for a present value of another type (or out of range); quotes a short excerpt."""
    if kind == "integer" and _is_integer(value):
        what = f"is {sanitize(value, 40)}, outside the 64-bit integer range"
    elif kind == "number" and _is_integer(value):
        what = "is too large for a 64-bit float"
    else:
        what = f"must be {kind}, got {json_kind(value)} {excerpt(value)}"
    row_id = row.get("id") if isinstance(row, dict) else None
    where = f" (row id {sanitize(row_id, 64)!r})" if isinstance(row_id, str) else ""
    return ResponseShapeError(
        f"field '{name}' {what}{where}; nothing was written",
        field=name,
        endpoint=endpoint,
        request_id=request_id,
    )


@dataclass(frozen=True)
class Endpoint:
    """One endpoint: method, path template, and the fields checked in each row (or the object)."""

    method: str
    template: str
    #: ``path -> kind``; ``a.b`` reaches into an object, ``a[].b`` into every element of an array.
    required: Mapping[str, Kind] = field(default_factory=dict)
    #: True when ``data`` is an array of rows (paging and complete sets), False for one object.
    rows: bool = False
    #: Optional fields with a declared type (same path syntax): missing or null is fine.
    typed: Mapping[str, Kind] = field(default_factory=dict)
    #: True when each row carries an ``engine``: rows outside ``ENGINES`` are dropped by the client.
    engine_rows: bool = False

    def __post_init__(self) -> None:
        declared = [(p, k, True) for p, k in self.required.items()]
        declared += [(p, k, False) for p, k in self.typed.items()]
        checks = sorted(
            ((path.replace("[]", ".[]").split("."), kind, required) for path, kind, required in declared),
            key=lambda check: len(check[0]) > 1,  # top-level fields first, each tier in its order
        )
        object.__setattr__(self, "_checks", tuple(checks))
        flat = [(parts[0], kind, required) for parts, kind, required in checks if len(parts) == 1]
        page_type = _page_type(flat) if len(flat) == len(checks) else None
        object.__setattr__(self, "_page_type", page_type)
        object.__setattr__(self, "_numbers", tuple(n for n, k, _ in flat if k == "number"))

    @property
    def key(self) -> str:
        """The name counters and errors use: method plus template, never a concrete id."""
        return f"{self.method} {self.template}"

    def path(self, **params: str) -> str:
        """The concrete path; ids are percent-encoded so no value can escape its path segment."""
        return self.template.format(**{k: quote(str(v), safe="") for k, v in params.items()})

    def validate(self, obj: Any, *, request_id: str | None = None) -> dict[str, Any]:
        """Return ``obj`` unchanged, or raise ``ResponseShapeError`` naming the endpoint and field."""

        def shape_error(message: str, name: str | None = None) -> ResponseShapeError:
            return ResponseShapeError(message, field=name, endpoint=self.key, request_id=request_id)

        def check(value: Any, parts: list[str], kind: Kind, where: str, required: bool) -> None:
            head, rest = parts[0], parts[1:]
            if head == "[]":  # every element; the array itself is checked by its own entry
                for index, item in enumerate(value if isinstance(value, list) else ()):
                    check(item, rest, kind, f"{where}[{index}]", required)
                return
            if not isinstance(value, dict):
                raise shape_error(f"field '{where}' must be an object, got {json_kind(value)}", where)
            name = f"{where}.{head}" if where else head
            if value.get(head) is None:  # optional, or the parent's own entry reports it
                if not rest and required:
                    raise shape_error(f"required field '{name}' is missing or null (expected {kind})", name)
            elif rest:
                check(value[head], rest, kind, name, required)
            elif not _CHECKS[kind](value[head]):
                raise _wrong(name, kind, value[head], self.key, request_id, obj)

        if not isinstance(obj, dict):
            what = "row" if self.rows else "object 'data'"
            raise shape_error(f"{what} must be an object, got {json_kind(obj)}")
        for parts, kind, required in self._checks:  # type: ignore[attr-defined]
            check(obj, parts, kind, "", required)
        return obj

    def validate_rows(self, rows: Sequence[Any], *, request_id: str | None = None) -> list[dict[str, Any]]:
        """The rows of a page, each checked as :meth:`validate` checks it (same errors, first row
        first): at once by msgspec, in C, and by the loop only when that check doubts."""
        if self._passes_at_once(rows):
            return list(rows)
        return [self.validate(row, request_id=request_id) for row in rows]

    def _passes_at_once(self, rows: Sequence[Any]) -> bool:
        """Whether msgspec finds every row a ``dict`` whose flat fields all pass (never a row
        :meth:`validate` would refuse: a ``Mapping`` that is not a dict or a ``Decimal`` number
        goes to the loop)."""
        page_type = self._page_type  # type: ignore[attr-defined]
        if page_type is None or not {dict}.issuperset(map(type, rows)):
            return False
        for name in self._numbers:  # type: ignore[attr-defined]
            if not _NUMBER_TYPES.issuperset(map(type, map(dict.get, rows, repeat(name)))):
                return False
        try:
            msgspec.convert(rows, page_type)
        except (msgspec.MsgspecError, ValueError, TypeError):  # a lone surrogate: UnicodeEncodeError
            return False
        return True


# --- Types the spec declares (SERVICE_SPEC.md, "Resources and their fields") ---------------------


def _kinds(
    *, string: str = "", strings: str = "", integer: str = "", number: str = "", boolean: str = ""
) -> dict[str, Kind]:
    """Field names (separated by blanks) by their kind: ``_kinds(string="id name")``."""
    names: dict[Kind, str] = {
        "string": string,
        "strings": strings,
        "integer": integer,
        "number": number,
        "boolean": boolean,
    }
    return {name: kind for kind, text in names.items() for name in text.split()}


_BRAND_TYPED = _kinds(string="domain category country created_at", strings="aliases engines")
_TOPIC_TYPED = _kinds(integer="prompt_count", string="created_at updated_at")
_MENTION_TYPED = _kinds(string="response_id brand_name prompt_id", number="position sentiment")
_GENERATION_TYPED = _kinds(
    string="brand_id content_type status topic title slug meta_title meta_description brief_md draft_md "
    "source_recommendation_id created_at updated_at"
)
_CITED_PAGE_TYPED = _kinds(string="domain root_domain", number="avg_position citation_share")
_TRACKED_TYPED = _kinds(strings="aliases domains", string="history_from tracked_since")
#: CompetitorTrendMetrics (the fields of every series point, besides its ``date``).
_METRICS = _kinds(
    integer="responses_answered responses_with_brand mention_count citation_count",
    number="detection_rate visibility_score avg_position avg_sentiment top3_visibility win_rate "
    "share_of_voice",
)


def _entity_typed(prefix: str) -> dict[str, Kind]:
    """A CompetitorTrendEntity's typed fields under ``prefix`` (``brand`` or ``competitors[]``)."""
    entity = _kinds(string="id history_from", boolean="is_your_brand", strings="domains")
    series = {f"series[].{name}": kind for name, kind in _METRICS.items()}
    return {f"{prefix}.{name}": kind for name, kind in (entity | series).items()}


# --- Assumed types (DESIGN.md, "Assumptions where the spec is silent"; the sandbox's rows) -----

_PROMPT_TYPED = _kinds(string="text topic_id created_at")
#: The answer rows' fields beyond DESIGN.md's ``{id, prompt_id, engine, checked_on}``, as the
#: sandbox serves them; declared so a wrong type stops the sync instead of poisoning the table.
_ANSWER_TYPED = _kinds(
    string="prompt_id", boolean="brand_mentioned", integer="brand_position mention_count citation_count"
)


# --- Documented endpoints (SERVICE_SPEC.md, "Endpoint table") -----------------------------------

#: The keys of a named record (brand, topic) and of one engine's row of a day (mention, answer).
_NAMED = _kinds(string="id name")
_ENGINE_DAY = _kinds(string="id engine checked_on")

LIST_BRANDS = Endpoint("GET", "/v1/brands", _NAMED, rows=True, typed=_BRAND_TYPED)
GET_BRAND = Endpoint("GET", "/v1/brands/{id}", _NAMED, typed=_BRAND_TYPED)
CREATE_TOPIC = Endpoint("POST", "/v1/brands/{id}/topics", _NAMED, typed=_TOPIC_TYPED)
RENAME_TOPIC = Endpoint("PATCH", "/v1/brands/{id}/topics/{topicId}", _NAMED, typed=_TOPIC_TYPED)
LIST_PROMPT_MENTIONS = Endpoint(
    "GET", "/v1/prompts/{id}/mentions", _ENGINE_DAY, rows=True, typed=_MENTION_TYPED, engine_rows=True
)
LIST_GENERATIONS = Endpoint(
    "GET", "/v1/brands/{id}/generations", {"id": "string"}, rows=True, typed=_GENERATION_TYPED
)
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
    typed=_kinds(
        boolean="target.is_own_domain",
        integer="series[].citations series[].brand_total_citations",
        number="series[].avg_position series[].share",
    ),
)
CITATION_URLS = Endpoint(
    "GET",
    "/v1/brands/{id}/citations/urls",
    {"url": "string", "citation_count": "integer"},
    rows=True,
    typed=_CITED_PAGE_TYPED,
)
LIST_TRACKED_COMPETITORS = Endpoint(
    "GET",
    "/v1/brands/{id}/tracked-competitors",
    {"id": "string", "brand_name": "string"},
    rows=True,
    typed=_TRACKED_TYPED,
)
UNTRACK_COMPETITOR = Endpoint(
    "DELETE",
    "/v1/brands/{id}/tracked-competitors/{competitorId}",
    {"id": "string", "untracked": "boolean"},
    typed={"brand_name": "string"},
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
    typed=_kinds(string="granularity from to engine")
    | _entity_typed("brand")
    | _entity_typed("competitors[]"),
)
CREATE_AUDIT = Endpoint(
    "POST",
    "/v1/audit-reports",
    {"id": "string", "status": "string", "poll": "string"},
    typed={"url": "string", "brand_id": "string"},
)

# --- Assumed endpoints (DESIGN.md, "Assumptions where the spec is silent") ----------------------

LIST_TOPICS = Endpoint("GET", "/v1/brands/{id}/topics", _NAMED, rows=True, typed=_TOPIC_TYPED)
LIST_PROMPTS = Endpoint("GET", "/v1/brands/{id}/prompts", {"id": "string"}, rows=True, typed=_PROMPT_TYPED)
LIST_ANSWERS = Endpoint(
    "GET", "/v1/brands/{id}/answers", _ENGINE_DAY, rows=True, typed=_ANSWER_TYPED, engine_rows=True
)
#: Polled on the creation response's ``poll`` path; the template only names it in counters.
POLL_AUDIT = Endpoint("GET", "/v1/audit-reports/{id}", {"id": "string", "status": "string"})
