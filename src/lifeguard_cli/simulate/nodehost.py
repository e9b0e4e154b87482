"""Where the twin's nodes boot: `lifeguard-node boot`, each boot its own process, forked from a warm host.

A node's boot is the real command line (`lifeguard.node.cli.main`, what the `lifeguard-node` script and the
node bundle run) in a process of its own, with the node's environment and root, its output in a file.
Starting Python and importing boto3 for each boot would cost about 0.6 s, longer than the boot itself; so
one host process imports them once and forks a child per boot (0.1 s a boot here). The child's exit status
is the boot's.

Protocol (one JSON object per line): the twin writes `{"argv": [...], "env": {...}, "output": PATH}`, the
host answers `{"exit": N}` when that boot's process has ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from lifeguard_cli.simulate.scenario import ScenarioError

__all__ = ["NodeHost", "main"]


class NodeHost:
    """The twin's side: a running host, asked for one boot at a time."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "lifeguard_cli.simulate.nodehost"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env),
            text=True,
        )

    def boot(self, argv: Sequence[str], env: Mapping[str, str], output: Path) -> int:
        """Run `lifeguard-node ARGV` with `env`, its output in `output`; its exit status."""
        stdin, stdout = self._pipes()
        stdin.write(json.dumps({"argv": list(argv), "env": dict(env), "output": str(output)}) + "\n")
        stdin.flush()
        answer = stdout.readline()
        if not answer:
            raise ScenarioError(f"the node host ended (exit {self._process.wait()}): see {output}")
        return int(json.loads(answer)["exit"])

    def close(self) -> None:
        """End the host (it ends by itself when its input closes)."""
        stdin, _ = self._pipes()
        stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        stdin, stdout = self._process.stdin, self._process.stdout
        if stdin is None or stdout is None:
            raise ScenarioError("the node host has no pipes")
        return stdin, stdout


def _boot_child(request: Mapping[str, Any]) -> None:
    """In the forked child: become the node's process, run the command line, exit with its status."""
    from lifeguard.node import cli

    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    output = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a Ctrl-C held off is taken here
        code = cli.main(request["argv"])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> int:
    """The host: import what a boot needs once, then fork a child per request."""
    import boto3

    from lifeguard.node import cli  # noqa: F401 - imported before the forks, once

    boto3.client("s3", region_name=os.environ.get("AWS_REGION", "us-east-1"))  # the models, loaded once
    for line in sys.stdin:
        request = json.loads(line)
        # Ctrl-C reaches the whole process group: held off across the fork, so that the child takes it
        # once its output is the node's file, not in the handlers a fork runs (their traceback went to the
        # terminal), and the host right after.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        pid = os.fork()
        if pid == 0:
            _boot_child(request)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the CLI says it, not the host
        sys.exit(130)
