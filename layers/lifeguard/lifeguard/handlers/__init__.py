"""What the two log-subscribed Lambdas do with a batch: `scaling_events` (PCS's scaling log: launches,
outcomes, loops) and `node_reports` (the sidecar's script runs: failures stored, suspects named), both
writing a group's state and its events through `updater`. `batch` is what both do first with the event."""
