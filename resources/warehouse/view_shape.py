"""Views as the writers keep them: the ``_current`` view's name and comments, and what an existing
view needs (nothing, new comments, or to be created again)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from resources.warehouse.contract import EVOLVED_COLUMN_DESCRIPTION, TableSpec, system_columns


def current_view_name(spec: TableSpec) -> str:
    return f"{spec.name}_current"


def current_view_description(spec: TableSpec) -> str:
    return f"Rows of {spec.name} still present in the API (is_current). {spec.description}"


def column_descriptions(spec: TableSpec, table_columns: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Each column of the table (in table order) and the comment the writer gives it: the spec's, the
    writer's own columns', or the one of a column the API added. A ``_current`` view carries the same."""
    known = {c.name: c.description for c in (*spec.columns, *system_columns(spec))}
    return tuple((name, known.get(name, EVOLVED_COLUMN_DESCRIPTION)) for name in table_columns)


@dataclass(frozen=True)
class ViewShape:
    """A view as the catalog shows it: its comment, and its columns' names and comments in order."""

    comment: str | None
    columns: tuple[tuple[str, str | None], ...]


#: What a view needs: nothing, new comments only, or to be (re)created (then commented).
ViewWork = Literal["create", "comment"] | None


def view_work(existing: ViewShape | None, description: str, columns: Sequence[tuple[str, str]]) -> ViewWork:
    """``create`` when the view is missing or its columns differ from ``columns`` (names, in order);
    ``comment`` when only its comment or a column's differs; None when it is as wanted."""
    if existing is None or [n for n, _ in existing.columns] != [n for n, _ in columns]:
        return "create"
    if existing.comment != description or [c for _, c in existing.columns] != [c for _, c in columns]:
        return "comment"
    return None
