"""One small module per AWS service: each owns its retries, pagination and error mapping, and turns
botocore's errors into Lifeguard's once, here at the boundary."""

from __future__ import annotations

from lifeguard.aws.clients import aws_client

__all__ = ["aws_client"]
