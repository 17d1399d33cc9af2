"""One query parameter style on every engine: ``:name``, written in the engine's own placeholders."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

#: A ``:name`` parameter, or a stretch where colons are not parameters: a quoted string or name, a
#: comment. ``::`` (a cast) and ``a:b`` (a slice) are not parameters either; ``:name::date`` is one.
_SQL_PARAMETER = re.compile(
    r"(?P<skip>'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`\\]|\\.)*`|--[^\n]*|/\*.*?\*/)"
    r"|(?<![:\w]):(?P<name>[A-Za-z_]\w*)"
    r"|(?P<percent>%)",
    re.DOTALL,
)


def bind_parameters(
    sql: str, params: Mapping[str, Any], placeholder: Callable[[str], str], *, escape_percent: bool = False
) -> str:
    """``sql`` with each ``:name`` written as ``placeholder(name)``; a name without a value in
    ``params`` raises ``ValueError`` naming it. ``escape_percent`` doubles every other ``%`` (for
    drivers that read ``%`` as a placeholder once parameters are given), but only when there are any.
    """
    escape = escape_percent and bool(params)

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name is None:
            text = match[0]
            return text.replace("%", "%%") if escape else text
        if name not in params:
            raise ValueError(f"query parameter :{name} has no value (given: {sorted(params) or 'none'})")
        return placeholder(name)

    if ":" not in sql and not escape:
        return sql
    return _SQL_PARAMETER.sub(replace, sql)
