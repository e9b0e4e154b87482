"""Defaults the node's command line shows in its help, apart from the modules they tune: printing them costs
`lifeguard-node boot` no import of the shipper or of the drain step."""

from __future__ import annotations

from lifeguard.node.executor import SCRIPT_TIMEOUT_SECONDS

__all__ = ["DRAIN_WATCH_SECONDS", "LAST_LOOK_SECONDS", "POLL_INTERVAL_SECONDS"]

# How often the shipper looks for finished script runs: a failure's report is in CloudWatch Logs within
# about this much of the script's end, and an idle look is one stat of executor.log.
POLL_INTERVAL_SECONDS = 0.1
# How long a shipper told to stop (SIGTERM) may take its last look before it is out, put in flight or not.
LAST_LOOK_SECONDS = 5.0
# The node's registration window: a nodeReady stage still running after it is past saving anyway.
DRAIN_WATCH_SECONDS = SCRIPT_TIMEOUT_SECONDS
