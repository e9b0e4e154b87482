"""Lifeguard's exceptions: one root, a shallow tree.

    LifeguardError
     ├── InvalidLifecycleConfigError (ValueError)   a nodeLifecycleActions config breaks PCS's rules
     ├── ServiceModelError (RuntimeError)           the vendored PCS service model is missing or unreadable
     ├── AwsCallError (RuntimeError)                an AWS call failed after its retries
     │    └── GroupNotFoundError                    the compute node group does not exist (any more)
     ├── InvalidSubscriptionEventError (ValueError) log_subscription.py: not a subscription event
     ├── ConditionFailedError                       store/: a conditional write's condition failed
     ├── TransactionConflictError                   store/: a transaction was cancelled
     ├── VersionConflictError                       store/: another invocation wrote the state first
     ├── RemediationBusyError                       remediation/: another remediation holds the group's lock
     ├── RemediationParkedError                     remediation/: failed after its retries; Lambda parks it
     ├── NotificationError                          notify/: a channel did not get an event after its retries
     ├── SlackError                                 notify/slack.py: a message not delivered (never the URL)
     └── FetchError, ShipperError, MissingBoto3Error  node/: a script download, the shipper, boto3 on the node

The errors of one module live in it (their names say where); the shared ones are here.
Parsers of records that arrive in batches (scaling-log records, node reports) do not raise: they return
a typed parse error, so one bad record never stops the rest of its batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from lifeguard.named_tuple import NamedTuple

__all__ = [
    "AwsCallError",
    "GroupNotFoundError",
    "InvalidLifecycleConfigError",
    "LifeguardError",
    "Problem",
    "ServiceModelError",
    "UnlistedClusterError",
]


class LifeguardError(Exception):
    """Root of every error Lifeguard raises on purpose."""


class Problem(NamedTuple):
    """One thing wrong with a document, and where: `path` is a JSON path such as
    `stages.nodeBootstrapped[2].onError` (empty for the document itself)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '(document)'}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        """The problem as JSON for programs."""
        return {"path": self.path, "message": self.message}


class InvalidLifecycleConfigError(LifeguardError, ValueError):
    """A `nodeLifecycleActions` config that PCS would reject; carries every problem at once."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(
            f"invalid nodeLifecycleActions ({count} problem{'s' if count != 1 else ''}):\n{lines}"
        )


class ServiceModelError(LifeguardError, RuntimeError):
    """The PCS service model shipped with the layer cannot be read."""


class AwsCallError(LifeguardError, RuntimeError):
    """An AWS call failed after botocore's retries; `code` is the service's error code, `status` the HTTP
    status of its answer (None: no answer, or none of HTTP's form)."""

    def __init__(
        self,
        operation: str,
        code: str,
        message: str,
        *,
        retry_after_seconds: int | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(f"{operation} failed: {code}: {message}")
        self.operation = operation
        self.code = code
        self.message = message
        self.retry_after_seconds = retry_after_seconds
        self.status = status

    @classmethod
    def from_exception(cls, operation: str, exc: BaseException) -> AwsCallError:
        """The one translation of a failed AWS call: botocore's ClientError gives its service error code,
        message, HTTP status and (PCS) `retryAfterSeconds`; anything else (a connection error, a timeout)
        its type."""
        response = getattr(exc, "response", None) or {}
        error = response.get("Error", {})
        retry_after = response.get("retryAfterSeconds")
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return cls(
            operation,
            str(error.get("Code") or type(exc).__name__)[:100],
            str(error.get("Message") or exc)[:1000],
            # The service's own hint, bounded: a wait is capped again by whoever sleeps on it.
            retry_after_seconds=min(retry_after, 3600)
            if isinstance(retry_after, int) and not isinstance(retry_after, bool) and retry_after >= 0
            else None,
            status=status if type(status) is int and 100 <= status <= 599 else None,
        )


class UnlistedClusterError(LifeguardError):
    """A batch named groups seen for the first time whose cluster PCS refused to list: no state can keep
    their records (a group is kept only once PCS lists it), so the batch fails once the rest of it is done,
    to be retried by Lambda and then parked with its records (the failed-batches queue), not lost."""


class GroupNotFoundError(AwsCallError):
    """The compute node group named by a record does not exist (any more)."""
