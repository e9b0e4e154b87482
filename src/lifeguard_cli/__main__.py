"""`python -m lifeguard_cli`: the `lifeguard` command, as its console script runs it."""

from lifeguard_cli.cli import main

main()
