"""`python -m lifeguard.node` and the node bundle run `lifeguard-node`."""

import gc
import sys

# The imports make nothing to collect: the collector's passes over them were 2-4 ms of every start.
gc.disable()
from lifeguard.node.cli import main  # noqa: E402

gc.enable()
sys.exit(main())
