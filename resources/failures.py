"""What kind of failure an error is: the one classification the sync's steps and the command line read.

Each error class declares ``failure_kind = FailureKind.X`` (subclasses inherit it); the kind gives the
command's exit code and whether the rest of the sync is worth starting. Imports nothing from the
project, so every layer can declare and read kinds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum


class FailureKind(StrEnum):
    """A failure's kind. ``stops_the_sync``: every later table of the sync would meet the same
    failure before doing any work (same settings, same key, no service, spent quota, cancelled);
    a 5xx, a 429, a bad answer or a spent request budget leave later tables a chance."""

    #: A setting or an argument is wrong; found before the first request (exit 2).
    CONFIGURATION = "configuration"
    #: The service refused the key: 401, 402, 403 (exit 3).
    REFUSED = "refused"
    #: The service cannot be reached (transport errors past the deadline) or the quota is spent (exit 4).
    UNREACHABLE = "unreachable"
    #: A 5xx or a 429 that persisted past the retry deadline (exit 4).
    TRANSIENT = "transient"
    #: The service's answer broke the contract (paging, fields), or the sync spent its request
    #: budget on a walk that never ended (exit 4).
    RESPONSE_SHAPE = "response_shape"
    #: The sync was cancelled or interrupted (exit 130, as for Ctrl+C).
    CANCELLED = "cancelled"
    #: Anything else: a step failed (exit 1).
    FAILED = "failed"

    @property
    def stops_the_sync(self) -> bool:
        return self in _STOPS_THE_SYNC

    @property
    def exit_code(self) -> int:
        """The command line's exit code (docs/OPERATIONS.md)."""
        return _EXIT_CODES[self]


_STOPS_THE_SYNC = frozenset(
    {FailureKind.CONFIGURATION, FailureKind.REFUSED, FailureKind.UNREACHABLE, FailureKind.CANCELLED}
)
_EXIT_CODES = {
    FailureKind.CONFIGURATION: 2,
    FailureKind.REFUSED: 3,
    FailureKind.UNREACHABLE: 4,
    FailureKind.TRANSIENT: 4,
    FailureKind.RESPONSE_SHAPE: 4,
    FailureKind.CANCELLED: 130,
    FailureKind.FAILED: 1,
}
#: Classes of other code, which cannot declare a kind, by name: Ctrl+C (or SIGTERM) and the
#: interruption Dagster raises in a step when its run is stopped.
_OTHER_CLASSES = {
    "KeyboardInterrupt": FailureKind.CANCELLED,
    "DagsterExecutionInterruptedError": FailureKind.CANCELLED,
}


def _declared(kind: type[BaseException]) -> FailureKind | None:
    declared = getattr(kind, "failure_kind", None)
    if isinstance(declared, FailureKind):
        return declared
    return next((_OTHER_CLASSES[k.__name__] for k in kind.__mro__ if k.__name__ in _OTHER_CLASSES), None)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def classified_error(exc: BaseException) -> BaseException:
    """The error whose kind :func:`failure_kind` reports: ``exc`` or the first of its cause chain
    that declares a kind (the API error inside Dagster's step failure says what went wrong); ``exc``
    when none does."""
    return next((e for e in _chain(exc) if _declared(type(e)) is not None), exc)


def failure_kind(exc: BaseException) -> FailureKind:
    """The kind declared by ``exc``'s class or by the first of its cause chain that declares one."""
    return _declared(type(classified_error(exc))) or FailureKind.FAILED


def _subclasses(kind: type[BaseException]) -> Iterator[type[BaseException]]:
    for subclass in kind.__subclasses__():
        yield subclass
        yield from _subclasses(subclass)


def _kinds_by_name() -> dict[str, FailureKind]:
    """Every loaded exception class that declares a kind, subclasses included, by class name."""
    kinds = dict(_OTHER_CLASSES)
    for kind in _subclasses(BaseException):
        declared = getattr(kind, "failure_kind", None)
        if isinstance(declared, FailureKind):
            kinds.setdefault(kind.__name__, declared)
    return kinds


def failure_kind_by_name(class_names: Sequence[str]) -> FailureKind:
    """The kind of a serialized error chain (Dagster keeps class names, not classes), outermost first:
    that of the first name a loaded class that declares a kind bears. The process that ran the step
    has loaded those classes."""
    kinds = _kinds_by_name()
    return next((kinds[name] for name in class_names if name in kinds), FailureKind.FAILED)
