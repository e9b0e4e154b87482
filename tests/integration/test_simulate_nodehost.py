"""The twin's node host (`lifeguard_cli.simulate.nodehost`): a real host process forking a real boot."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


def test_a_boot_is_forked_with_ctrl_c_held_off_until_its_output_is_its_own(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group: in the handlers a fork runs in the child (logging's among
    them) it raised a KeyboardInterrupt whose traceback went to the terminal. The child's side of the fork
    runs with SIGINT blocked; the boot itself takes it, its output in the node's file."""
    seen = tmp_path / "blocked-in-child"
    host = textwrap.dedent(
        f"""
        import os, signal, sys
        def note():
            with open({str(seen)!r}, "w") as out:
                out.write(str(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
        os.register_at_fork(after_in_child=note)
        from lifeguard.node import cli
        real = cli.main
        def main(argv):  # what the boot's scripts would inherit
            print("SIGINT blocked:", signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
            return real(argv)
        cli.main = main
        from lifeguard_cli.simulate import nodehost
        sys.exit(nodehost.main())
        """
    )
    output = tmp_path / "boot.out"
    request = json.dumps({"argv": ["--version"], "env": {}, "output": str(output)})
    done = subprocess.run(
        [sys.executable, "-c", host],
        check=False,
        input=request + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"exit": 0}
    assert seen.read_text() == "True"
    blocked, version = output.read_text().splitlines()  # the boot ran, its output in its file
    assert blocked == "SIGINT blocked: False"  # its scripts take Ctrl-C
    assert version.startswith("lifeguard-node ")
