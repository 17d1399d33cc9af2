"""One classification of failures: every error class's kind, the exit code and the stop it implies,
read alike from a live exception, its cause chain, or the class names of a serialized step error."""

from __future__ import annotations

import inspect

import pytest
from dagster import DagsterExecutionInterruptedError

from pipelines.cli_output import EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_PARTIAL, EXIT_REFUSED, EXIT_UNAVAILABLE
from resources.api import errors
from resources.failures import FailureKind, classified_error, failure_kind, failure_kind_by_name
from resources.warehouse.contract import WarehouseConfigError
from settings import ConfigError

#: Every error class that can end a step or a command: (its kind, its exit code, stops the sync).
EXPECTED: dict[type[BaseException], tuple[FailureKind, int, bool]] = {
    ConfigError: (FailureKind.CONFIGURATION, EXIT_CONFIG, True),
    WarehouseConfigError: (FailureKind.CONFIGURATION, EXIT_CONFIG, True),
    errors.ConfigurationError: (FailureKind.CONFIGURATION, EXIT_CONFIG, True),
    errors.AuthenticationError: (FailureKind.REFUSED, EXIT_REFUSED, True),
    errors.SubscriptionRequiredError: (FailureKind.REFUSED, EXIT_REFUSED, True),
    errors.PermissionDeniedError: (FailureKind.REFUSED, EXIT_REFUSED, True),
    errors.TransportError: (FailureKind.UNREACHABLE, EXIT_UNAVAILABLE, True),
    errors.ServiceUnreachableError: (FailureKind.UNREACHABLE, EXIT_UNAVAILABLE, True),
    errors.QuotaExceededError: (FailureKind.UNREACHABLE, EXIT_UNAVAILABLE, True),
    errors.ServerError: (FailureKind.TRANSIENT, EXIT_UNAVAILABLE, False),
    errors.RateLimitError: (FailureKind.TRANSIENT, EXIT_UNAVAILABLE, False),
    errors.PagingError: (FailureKind.RESPONSE_SHAPE, EXIT_UNAVAILABLE, False),
    errors.ResponseShapeError: (FailureKind.RESPONSE_SHAPE, EXIT_UNAVAILABLE, False),
    # each later table's plan grows the budget by its own calls: a later table can still land
    errors.RequestBudgetExceeded: (FailureKind.RESPONSE_SHAPE, EXIT_UNAVAILABLE, False),
    errors.SyncCancelled: (FailureKind.CANCELLED, EXIT_INTERRUPTED, True),
    DagsterExecutionInterruptedError: (FailureKind.CANCELLED, EXIT_INTERRUPTED, True),
    KeyboardInterrupt: (FailureKind.CANCELLED, EXIT_INTERRUPTED, True),
    errors.VisibilityAPIError: (FailureKind.FAILED, EXIT_PARTIAL, False),
    errors.BadRequestError: (FailureKind.FAILED, EXIT_PARTIAL, False),
    errors.NotFoundError: (FailureKind.FAILED, EXIT_PARTIAL, False),
    RuntimeError: (FailureKind.FAILED, EXIT_PARTIAL, False),
}


def _instance(kind: type[BaseException]) -> BaseException:
    return kind() if kind in (KeyboardInterrupt, errors.SyncCancelled) else kind("x")


def test_every_error_class_of_the_api_client_is_classified_here() -> None:
    declared = {
        kind
        for _, kind in inspect.getmembers(errors, inspect.isclass)
        if issubclass(kind, BaseException) and kind.__module__ == errors.__name__
    }
    assert declared - set(EXPECTED) == set()


@pytest.mark.parametrize("kind", list(EXPECTED), ids=lambda kind: kind.__name__)
def test_each_error_class_has_its_kind_exit_code_and_stop(kind: type[BaseException]) -> None:
    expected_kind, code, stops = EXPECTED[kind]
    error = _instance(kind)
    assert failure_kind(error) is expected_kind
    assert failure_kind(error).exit_code == code
    assert failure_kind(error).stops_the_sync is stops
    assert failure_kind_by_name([kind.__name__]) is expected_kind  # a serialized step error


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("x"), EXIT_CONFIG),
        (errors.AuthenticationError("x", status=401), EXIT_REFUSED),
        (errors.SubscriptionRequiredError("x", status=402), EXIT_REFUSED),
        (errors.QuotaExceededError("x", status=429), EXIT_UNAVAILABLE),
        (errors.TransportError("x"), EXIT_UNAVAILABLE),
        (RuntimeError("x"), EXIT_PARTIAL),
    ],
)
def test_errors_map_to_the_documented_exit_codes(error: BaseException, code: int) -> None:
    assert failure_kind(error).exit_code == code


def test_an_error_raised_from_an_api_error_has_the_api_error_s_kind() -> None:
    refused = errors.AuthenticationError("invalid_api_key", status=401)
    try:
        try:
            raise refused
        except errors.AuthenticationError as exc:
            raise RuntimeError("Error occurred while executing op") from exc
    except RuntimeError as wrapper:
        assert failure_kind(wrapper) is FailureKind.REFUSED
        assert classified_error(wrapper) is refused  # the message the command prints


def test_the_first_error_of_the_chain_that_declares_a_kind_decides() -> None:
    try:
        try:
            raise errors.TransportError("connection reset")
        except errors.TransportError:
            raise errors.NotFoundError("not_found", status=404) from None
    except errors.NotFoundError as exc:
        assert failure_kind(exc) is FailureKind.FAILED
    unclassified = ValueError("no kind anywhere")
    assert classified_error(unclassified) is unclassified


def test_a_serialized_chain_is_read_outermost_first_and_subclasses_by_their_own_name() -> None:
    class DeclaredInATest(errors.QuotaExceededError):
        pass

    assert failure_kind_by_name(["DagsterExecutionStepExecutionError", "AuthenticationError"]) is (
        FailureKind.REFUSED
    )
    assert failure_kind_by_name(["PagingError", "TransportError"]) is FailureKind.RESPONSE_SHAPE
    assert failure_kind_by_name(["DeclaredInATest"]) is FailureKind.UNREACHABLE
    assert failure_kind_by_name(["DagsterExecutionStepExecutionError", "ValueError"]) is FailureKind.FAILED
    assert failure_kind_by_name([]) is FailureKind.FAILED


def test_the_kinds_that_stop_the_sync_are_those_every_later_table_would_repeat() -> None:
    assert {kind for kind in FailureKind if kind.stops_the_sync} == {
        FailureKind.CONFIGURATION,
        FailureKind.REFUSED,
        FailureKind.UNREACHABLE,
        FailureKind.CANCELLED,
    }
