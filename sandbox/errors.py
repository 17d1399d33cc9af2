"""The spec's error envelope, raised from anywhere in a handler and rendered in one place."""

from __future__ import annotations

from sandbox.encoding import JsonResponse

STATUS_BY_CODE: dict[str, int] = {
    "missing_parameter": 400,
    "invalid_request": 400,
    "invalid_engine": 400,
    "invalid_date": 400,
    "missing_api_key": 401,
    "invalid_api_key": 401,
    "subscription_required": 402,
    "plan_not_eligible": 403,
    "forbidden": 403,
    "brand_scope_forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "rate_limited": 429,
    "quota_exceeded": 429,
    "endpoint_rate_limited": 429,
    "concurrency_limited": 429,
    "internal_error": 500,
}


class ApiError(Exception):
    """An answer of the spec's Errors table; the status follows from the code."""

    def __init__(self, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = STATUS_BY_CODE[code]
        self.headers = headers or {}


def error_response(code: str, message: str, headers: dict[str, str] | None = None) -> JsonResponse:
    return JsonResponse(
        {"error": {"code": code, "message": message}}, status_code=STATUS_BY_CODE[code], headers=headers
    )


def not_found(what: str = "Record") -> ApiError:
    return ApiError("not_found", f"{what} not found.")
