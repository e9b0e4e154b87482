"""`python -m lifeguard.node` and the node bundle run `lifeguard-node`."""

import sys

from lifeguard.node.cli import main

sys.exit(main())
