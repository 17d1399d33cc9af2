"""The sandbox's endpoint templates and the hooks its middlewares may use.

This module is the contract between the sandbox core (``app.py``) and the limits, faults and
OpenAPI modules: templates are spelled exactly as they appear in ``/_sandbox/stats``.

Hooks placed in the ASGI scope of every ``/v1`` request (before the limits and faults middlewares
run), under ``scope["sandbox"]``:

- ``"restate"``: ``Callable[[], int]``; bumps the revision so the last ``restate_days`` days change
  (the flaky and hostile fault profiles call it); returns the new revision.
- ``"template"``: ``str | None``; the matched ``"METHOD /v1/..."`` template, ``None`` when unknown.
- ``"stats"``: the :class:`sandbox.stats.RequestStats` of the running sandbox.
- ``"request_id"``: the ``X-Request-Id`` the response will carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

#: Every ``/v1`` endpoint the sandbox serves, as ``(method, template)``.
V1_ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("GET", "/v1/brands"),
    ("POST", "/v1/brands"),
    ("GET", "/v1/brands/{id}"),
    ("GET", "/v1/brands/{id}/topics"),
    ("POST", "/v1/brands/{id}/topics"),
    ("PATCH", "/v1/brands/{id}/topics/{topicId}"),
    ("GET", "/v1/brands/{id}/prompts"),
    ("GET", "/v1/brands/{id}/answers"),
    ("GET", "/v1/prompts/{id}/mentions"),
    ("GET", "/v1/brands/{id}/generations"),
    ("GET", "/v1/brands/{id}/generations/{generationId}"),
    ("GET", "/v1/brands/{id}/citations/trends"),
    ("GET", "/v1/brands/{id}/citations/urls"),
    ("GET", "/v1/brands/{id}/tracked-competitors"),
    ("DELETE", "/v1/brands/{id}/tracked-competitors/{competitorId}"),
    ("GET", "/v1/brands/{id}/competitors/trends"),
    ("POST", "/v1/audit-reports"),
    ("GET", "/v1/audit-reports/{id}"),
)

#: Endpoints that spend money (they carry ``X-Endpoint-*`` headers and a per-endpoint limit).
SPENDING_ENDPOINTS: frozenset[str] = frozenset({"POST /v1/audit-reports"})

#: Endpoints outside ``/v1``: never limited, never faulted, never counted in stats.
ADMIN_ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("GET", "/_sandbox/stats"),
    ("POST", "/_sandbox/stats/reset"),
    ("GET", "/_sandbox/keys"),
    ("POST", "/_sandbox/restate"),
    ("POST", "/_sandbox/config"),
    ("GET", "/_sandbox/config"),
    ("POST", "/_sandbox/track"),
    ("GET", "/openapi.json"),
)

#: Header that makes any ``/v1`` request answer 500 ``internal_error`` (documented trigger).
FAIL_HEADER = "x-sandbox-fail"


@dataclass(frozen=True)
class _Compiled:
    template: str
    pattern: re.Pattern[str]
    methods: frozenset[str]


@cache
def _compiled() -> tuple[_Compiled, ...]:
    by_template: dict[str, set[str]] = {}
    for method, template in V1_ENDPOINTS:
        by_template.setdefault(template, set()).add(method)
    out = []
    for template, methods in by_template.items():
        regex = "^" + re.sub(r"\\\{[A-Za-z]+\\\}", "[^/]+", re.escape(template)) + "/?$"
        out.append(_Compiled(template, re.compile(regex), frozenset(methods)))
    return tuple(out)


def match_template(method: str, path: str) -> str | None:
    """``"GET /v1/brands/{id}"`` for a concrete request, or ``None`` when the path is unknown.

    A known path with an undeclared verb still matches (as ``"PUT /v1/brands/{id}"``), so that 405
    answers are counted under their template.
    """
    for item in _compiled():
        if item.pattern.match(path):
            return f"{method.upper()} {item.template}"
    return None


def scope_template(scope: Any) -> str | None:
    """The request's template: the one ``RequestIdMiddleware`` matched (``scope["sandbox"]``),
    else matched now (an app run without that middleware)."""
    hooks = scope.get("sandbox")
    return hooks["template"] if hooks else match_template(scope["method"], scope["path"])


def declared_methods(path: str) -> frozenset[str] | None:
    """The verbs declared for a concrete path; ``None`` when the path is unknown."""
    for item in _compiled():
        if item.pattern.match(path):
            return item.methods
    return None
