"""A local PCS endpoint: PCS's JSON 1.0 protocol on loopback, validated against botocore's PCS model.

- `clock`: `ManualClock`, which moves only when told to, and the system clock a `LocalPcs` uses otherwise.
- `resources`: `LocalPcs`, the clusters, compute node groups and queues it keeps, the faults injected into
  it and the `Call`s it received; `handle` validates each request and response against the PCS model,
  encodes the answer as JSON 1.0 values (timestamps in ISO 8601, UTC, as the model says for PCS's) and
  refuses with a `PcsApiError`; a cluster id it does not have is refused as PCS does, AccessDeniedException.
- `transport`: the HTTP side: the `X-Amz-Target` request handler, the loopback server, `LocalPcsServer`
  and `serve_local_pcs`, which serves a `LocalPcs` for the duration of a block.
"""

from __future__ import annotations

from lifeguard_cli.local.pcs.clock import ManualClock
from lifeguard_cli.local.pcs.resources import LocalPcs, PcsApiError
from lifeguard_cli.local.pcs.transport import LocalPcsServer, serve_local_pcs

__all__ = ["LocalPcs", "LocalPcsServer", "ManualClock", "PcsApiError", "serve_local_pcs"]
