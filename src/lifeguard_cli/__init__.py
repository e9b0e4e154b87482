"""The operator side of PCS Lifeguard: the `lifeguard` CLI and the local AWS it can run against."""
