"""`python -m lifeguard.node` and the node bundle run `lifeguard-node`."""

import gc

# The imports make nothing to collect: the collector's passes over them were 2-4 ms of every start.
gc.disable()
try:
    from lifeguard.node.cli import end_process, main
finally:
    gc.enable()  # `ship` and the drain watcher run for the node's life: they collect as any process does
end_process(main())
