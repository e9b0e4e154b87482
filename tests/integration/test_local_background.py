"""`lifeguard local up|down` and `replay --keep`: a local AWS that outlives its command, which `--local`
finds."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EVENTS

pytestmark = pytest.mark.integration
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
STREAMS = EVENTS / "streams"
ARTICLE = EVENTS / "configs" / "article-terminate.json"


def lifeguard(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LIFEGUARD), *args], env=env, capture_output=True, text=True, timeout=180, check=False
    )


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """No AWS of this shell: only what the state file under tmp_path says."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AWS_") and key not in {"LIFEGUARD_TABLE", "LIFEGUARD_STACK_NAME"}
    }
    environ.update(LIFEGUARD_LOCAL_STATE=str(tmp_path / "local.json"), COLUMNS="200")
    yield environ
    lifeguard("local", "down", env=environ)


def exported(env: dict[str, str], printed: str) -> dict[str, str]:
    """`env` with what `lifeguard local up` printed exported, as `eval "$(lifeguard local up)"` does."""
    shell = dict(env)
    for line in printed.splitlines():
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            shell[key] = value
    return shell


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("mode", ["quarantine", "off"])  # any of the stack's DefaultModes
def test_local_up_serves_a_deployed_stack_until_local_down(env: dict[str, str], mode: str) -> None:
    up = lifeguard("local", "up", "--mode", mode, env=env)
    assert up.returncode == 0, up.stderr
    assert up.stderr.startswith("starting the local AWS and its stack…\n")  # about two seconds
    assert "export AWS_ENDPOINT_URL=http://127.0.0.1:" in up.stdout
    assert "export LIFEGUARD_STACK_NAME=pcs-lifeguard-local" in up.stdout
    pid = json.loads(Path(env["LIFEGUARD_LOCAL_STATE"]).read_text())["pid"]
    assert alive(pid)
    status = lifeguard("status", "--local", "--json", env=env)
    assert status.returncode == 0, status.stderr
    stack = json.loads(status.stdout)["stack"]
    assert (stack["stack_name"], stack["default_mode"]) == ("pcs-lifeguard-local", mode)
    elsewhere = lifeguard("status", "--local", "--json", "--region", "eu-west-1", env=env)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert json.loads(elsewhere.stdout)["stack"]["region"] == stack["region"]
    assert elsewhere.stderr.splitlines()[0] == (
        "lifeguard: --local: --region eu-west-1 not used (the local AWS is one region, with test keys)"
    )
    again = lifeguard("local", "up", env=env)
    assert again.stdout.startswith(f"# the local AWS is up already (pid {pid}, DefaultMode {mode})\n")
    down = lifeguard("local", "down", env=env)
    assert down.stdout == f"the local AWS (pid {pid}) is stopped\n"
    assert not alive(pid)
    assert not Path(env["LIFEGUARD_LOCAL_STATE"]).exists()
    gone = lifeguard("status", "--local", env=env)
    assert gone.returncode == 1
    assert gone.stderr.splitlines()[-1].startswith(
        "lifeguard status: --local needs a local AWS: lifeguard local"
    )


def test_replay_keep_leaves_its_outcome_for_status_history_and_undo(env: dict[str, str]) -> None:
    streams = [str(STREAMS / f"article-terminate-{name}.jsonl") for name in ("loop", "node-reports")]
    kept = lifeguard("replay", "--keep", "--json", "--mode", "quarantine", *streams, env=env)
    assert kept.returncode == 0, kept.stderr
    (applied,) = [
        e["detail"] for e in json.loads(kept.stdout)["events"] if e["detail-type"] == "RemediationApplied"
    ]
    assert "kept: the local AWS serves on" in kept.stderr
    status = json.loads(lifeguard("status", "--local", "--json", env=env).stdout)
    (row,) = status["groups"]
    assert (row["compute_node_group_id"], row["mode"], row["mode_source"]) == (
        "pcs_abcdef01",
        "quarantine",
        "default",
    )
    # Where the replay's notifications went (its topic, beside its bus), as a deployed stack's status names
    # its own: it said there was no topic.
    assert any(m["channel"] == "sns" for m in json.loads(kept.stdout)["notifications"])
    replay = status["stack"]["event_bus"].removesuffix("-bus")
    assert status["stack"]["notification_topic"].endswith(f":{replay}-notifications")
    assert status["stack"]["slack"] is True
    # The notification's undo line, pasted as it is (--yes: no terminal here to answer its question).
    assert applied["undo"] == "lifeguard undo pcs_abcdef01 --cluster pcs_abc123de45 --local"
    program, *arguments = shlex.split(applied["undo"])
    assert program == "lifeguard"
    undone = lifeguard(*arguments, "--yes", env=env)
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.rstrip().endswith("applied")
    history = json.loads(lifeguard("history", "pcs_abcdef01", "--local", "--json", env=env).stdout)
    decisions = [entry["decision"] for entry in history["entries"]]
    assert decisions[:1] == ["applied"]
    assert "undo" in decisions


def test_replay_keep_leaves_a_stack_of_its_mode_and_dry_run_in_place_of_the_local_aws_up(
    env: dict[str, str],
) -> None:
    up = lifeguard("local", "up", env=env)
    assert up.returncode == 0, up.stderr
    pid = json.loads(Path(env["LIFEGUARD_LOCAL_STATE"]).read_text())["pid"]
    again = lifeguard("local", "up", "--mode", "revert", env=env)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == (
        f"lifeguard local up: the local AWS is up already (pid {pid}) with DefaultMode notify: lifeguard "
        "local down, then local up --mode revert\n"
    )
    loop = str(STREAMS / "article-terminate-loop.jsonl")
    kept = lifeguard("replay", "--keep", "--dry-run", "--mode", "quarantine", loop, env=env)
    assert kept.returncode == 0, kept.stderr
    assert f"kept: it replaces the local AWS that was up (pid {pid})" in kept.stderr
    assert 'eval "$(lifeguard local up)" exports this one\'s' in " ".join(kept.stderr.split())
    status = json.loads(lifeguard("status", "--local", "--json", env=env).stdout)
    assert (status["stack"]["default_mode"], status["stack"]["dry_run"]) == ("quarantine", True)
    # The dry run's change is in the history, said as not made: it does not read as a change made.
    history = lifeguard("history", "pcs_abcdef01", "--local", env={**env, "COLUMNS": "200"}).stdout
    assert "not made:" in history
    assert "onError: TERMINATE → STOP_SEQUENCE" in history
    # `local up` without --mode takes the one running, and says which mode that is.
    reused = lifeguard("local", "up", env=env).stdout
    assert reused.startswith("# the local AWS is up already (pid ")
    assert reused.splitlines()[0].endswith(", DefaultMode quarantine)")


def test_enroll_can_be_tried_on_a_group_made_in_the_local_aws(env: dict[str, str]) -> None:
    """`lifeguard local up`, a group made there as the AWS CLI would (the exported endpoint), then enroll
    --local puts the local stack's shipper first in it; GROUP may be CLUSTER/GROUP."""
    from lifeguard_cli.deployment import LoopbackSession
    from tests.integration.test_local_pcs import create_cluster, create_group

    up = lifeguard("local", "up", env=env)
    assert up.returncode == 0, up.stderr
    shell = exported(env, up.stdout)
    pcs = LoopbackSession(shell["AWS_ENDPOINT_URL"], shell["AWS_ENDPOINT_URL_PCS"]).client("pcs")
    cluster_id = create_cluster(pcs)
    create_group(pcs, cluster_id, nodeLifecycleActions=json.loads(ARTICLE.read_text()))
    shown = lifeguard("enroll", "lca/lca-static", "--local", "--dry-run", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "dry run" in shown.stdout
    done = lifeguard("enroll", "lca-static", "--cluster", "lca", "--local", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    group = pcs.get_compute_node_group(clusterIdentifier="lca", computeNodeGroupIdentifier="lca-static")
    first = group["computeNodeGroup"]["nodeLifecycleActions"]["stages"]["nodeBootstrapped"][0]
    assert first["name"] == "lifeguard-shipper"
    kept = lifeguard("replay", "--keep", str(STREAMS / "article-terminate-loop.jsonl"), env=env)
    assert kept.returncode == 0, kept.stderr
    replayed = lifeguard("enroll", "pcs_abc123de45/pcs_abcdef01", "--local", "--dry-run", env=env)
    assert (replayed.returncode, replayed.stderr.splitlines()[-1]) == (
        1,
        "lifeguard enroll: the local AWS replay --keep left publishes no shipper: stop it with lifeguard "
        "local down, then enroll on the one lifeguard local up starts",
    )
    piped = subprocess.run(
        [str(LIFEGUARD), "replay", "--keep", "-"],
        input=(STREAMS / "article-terminate-loop.jsonl").read_text(),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (piped.returncode, piped.stderr) == (
        2,
        "lifeguard replay: --keep reads files, not stdin (-): save it to a file first\n",
    )
    unnamed = lifeguard("enroll", "lca-static", "--local", "--dry-run", env=env)
    assert (unnamed.returncode, unnamed.stderr) == (
        2,
        "lifeguard enroll: which cluster? pass --cluster, or GROUP as CLUSTER/GROUP\n",
    )


@pytest.mark.parametrize(
    "name",
    [
        "cloudtrail-risky-change-then-loop",
        "article-contained-then-bad-change",
    ],
)
def test_undo_can_be_tried_after_replay_keep_of_a_stream_ending_right_after_a_change(
    env: dict[str, str], name: str
) -> None:
    """Streams whose last change came less than PCS's update time before their end: the kept group has
    settled (ACTIVE), not left UPDATING for good on the stream's stopped clock."""
    kept = lifeguard("replay", "--keep", str(STREAMS / f"{name}.jsonl"), env=env)
    assert kept.returncode == 0, kept.stderr
    undone = lifeguard("undo", "pcs_abcdef01", "--local", "--yes", env=env)
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.rstrip().endswith("applied")


def test_status_and_history_tell_kept_nodes_pcs_has_since_replaced_as_unhealthy(env: dict[str, str]) -> None:
    """Both nodes the quarantine kept were terminated as unhealthy later: none is kept any more, and the
    history says when each went; a skip held back by no dry run is not called one."""
    kept = lifeguard("replay", "--keep", str(STREAMS / "quarantine-drained-replacement-loop.jsonl"), env=env)
    assert kept.returncode == 0, kept.stderr
    (row,) = json.loads(lifeguard("status", "--local", "--json", env=env).stdout)["groups"]
    gone = ["i-0c4d5e6f7a8b9c0d1", "i-0d5e6f7a8b9c0d1e2"]
    assert (row["open_episode"]["kept"], row["open_episode"]["replaced"]) == ([], gone)
    shown = lifeguard("status", "--local", env=env).stdout
    assert "0 kept, 2 replaced as" in " ".join(shown.split())  # the table wraps its cells
    # The loop goes on as a replacement loop (told again as one): not left at "contained".
    assert row["open_episode"]["replacement_loop"] == 2
    wide = lifeguard("status", "--local", env={**env, "COLUMNS": "300"}).stdout
    assert "contained, not fixed: 0 kept, 2 replaced as unhealthy; now a replacement loop: 2 nodes" in wide
    assert "(dry run)" not in shown
    history = json.loads(lifeguard("history", "pcs_abcdef01", "--local", "--json", env=env).stdout)
    ends = [
        (e["decision"], e["reason"]) for e in history["entries"] if e["decision"] in ("contained", "replaced")
    ]
    assert [decision for decision, _ in ends] == ["contained", "replaced", "replaced"]
    assert gone[1] not in ends[0][1]  # kept after the loop was first contained
    assert [gone[0] in ends[1][1], gone[1] in ends[2][1]] == [True, True]
    # The latest entries alone, the episode's milestones among them, in time order.
    every = [(e["decision"], e["at"]) for e in history["entries"]]
    latest = json.loads(
        lifeguard("history", "pcs_abcdef01", "--local", "--last", "2", "--json", env=env).stdout
    )
    assert [(e["decision"], e["at"]) for e in latest["entries"]] == every[-2:]


def test_replay_keep_of_a_wrong_input_is_one_line_exit_2_and_nothing_left_running(
    env: dict[str, str], tmp_path: Path
) -> None:
    wrong = tmp_path / "not-a-stream.json"
    wrong.write_text('{"a": 1}\n')
    done = lifeguard("replay", "--keep", str(wrong), env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("lifeguard replay: ")
    assert len(done.stderr.splitlines()) == 1
    assert not Path(env["LIFEGUARD_LOCAL_STATE"]).exists()
    assert lifeguard("local", "down", env=env).stdout == "no local AWS was running\n"


def test_replay_keep_of_a_wrong_input_leaves_the_local_aws_running_as_it_was(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A replay refused is refused before anything runs: the local AWS `local up` left serving, and what
    was made there, is not stopped for a replay that never starts."""
    assert lifeguard("local", "up", env=env).returncode == 0
    pid = json.loads(Path(env["LIFEGUARD_LOCAL_STATE"]).read_text())["pid"]
    for refused in (tmp_path / "missing.jsonl", tmp_path / "not-a-stream.json"):
        if refused.suffix == ".json":
            refused.write_text('{"a": 1}\n')
        done = lifeguard("replay", "--keep", str(refused), env=env)
        assert done.returncode == 2
        assert len(done.stderr.splitlines()) == 1
    assert alive(pid)
    assert json.loads(Path(env["LIFEGUARD_LOCAL_STATE"]).read_text())["pid"] == pid
    assert lifeguard("status", "--local", env=env).returncode == 0


def test_a_state_file_whose_process_is_another_now_is_not_stopped(env: dict[str, str]) -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        state = {"pid": other.pid, "started": "0", "environ": {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}}
        Path(env["LIFEGUARD_LOCAL_STATE"]).write_text(json.dumps(state))  # as left before a reboot
        assert lifeguard("local", "down", env=env).stdout == "no local AWS was running\n"
        assert other.poll() is None  # still running: never signalled
        assert not Path(env["LIFEGUARD_LOCAL_STATE"]).exists()
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize(
    "content", [b"garbage\n", b"\x00\xff\x10", b'{"pid": "x"}'], ids=["text", "binary", "json"]
)
def test_local_down_leaves_a_file_that_is_no_state_file_as_it_is(env: dict[str, str], content: bytes) -> None:
    """LIFEGUARD_LOCAL_STATE naming a file local up did not write (a slip of the variable) had that file
    deleted by local down, with 'no local AWS was running', and written over by local up and replay
    --keep, then deleted by the next local down."""
    path = Path(env["LIFEGUARD_LOCAL_STATE"])
    path.write_bytes(content)
    for command in (
        ["local", "down"],
        ["local", "up"],
        ["replay", "--keep", str(STREAMS / "article-terminate-loop.jsonl")],
    ):
        done = lifeguard(*command, env=env)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (
            f"lifeguard {' '.join(command[: 2 if command[0] == 'local' else 1])}: {path} is not a local AWS "
            "state file (LIFEGUARD_LOCAL_STATE?): left as it is\n"
        )
        assert path.read_bytes() == content


def test_a_state_file_whose_folder_cannot_be_made_is_said_before_anything_starts(
    env: dict[str, str], tmp_path: Path
) -> None:
    """LIFEGUARD_LOCAL_STATE under a file (not a folder) was an internal error, and for `replay --keep`
    only once the whole replay had run."""
    blocking = tmp_path / "afile"
    blocking.write_text("")
    env = {**env, "LIFEGUARD_LOCAL_STATE": str(blocking / "state.json")}
    for command in (["local", "up"], ["replay", "--keep", str(STREAMS / "article-terminate-loop.jsonl")]):
        done = lifeguard(*command, env=env)
        assert (done.returncode, done.stdout) == (1, "")
        name = " ".join(command[: 2 if command[0] == "local" else 1])
        assert done.stderr.startswith(f"lifeguard {name}: cannot keep the local AWS's state in {blocking}: ")
        assert "replaying" not in done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_two_local_up_at_once_leave_nothing_running_after_local_down(env: dict[str, str]) -> None:
    started = [
        subprocess.Popen(
            [str(LIFEGUARD), "local", "up"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=180) for process in started]
    for out, _ in outputs:
        # "# the local AWS is up: ..." or "# the local AWS is up already (pid N)"
        assert out.startswith("# the local AWS is up"), out
    state = json.loads(Path(env["LIFEGUARD_LOCAL_STATE"]).read_text())
    # Every `lifeguard local up` process of this test's state file, whether the state file names it or not.
    servers = {
        pid
        for pid in _local_up_processes()
        if _env_of(pid).get("LIFEGUARD_LOCAL_STATE") == env["LIFEGUARD_LOCAL_STATE"]
    }
    assert state["pid"] in servers
    try:
        assert lifeguard("local", "down", env=env).returncode == 0
        time.sleep(1)
        left = {pid for pid in servers if alive(pid)}
        assert not left, f"local down left {left} running (up printed {[o for o, _ in outputs]})"
    finally:
        for pid in servers:
            if alive(pid):
                os.kill(pid, 15)


def _local_up_processes() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if [a for a in argv if a in (b"local", b"up")] == [b"local", b"up"] and any(
                a.endswith(b"/lifeguard") for a in argv
            ):
                found.add(int(entry.name))
    return found


def _env_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def test_local_up_while_a_replay_is_kept_prints_exports_that_status_local_can_use(
    env: dict[str, str],
) -> None:
    kept = lifeguard("replay", "--keep", str(STREAMS / "article-terminate-loop-with-reports.jsonl"), env=env)
    assert kept.returncode == 0, kept.stderr
    up = lifeguard("local", "up", env=env)
    assert up.returncode == 0, up.stderr
    status = lifeguard("status", "--local", env=exported(env, up.stdout))
    assert status.returncode == 0, status.stderr


def test_after_eval_local_up_a_replay_keep_is_what_local_finds(env: dict[str, str]) -> None:
    """`eval "$(lifeguard local up)"`, then `replay --keep`, which replaces that local AWS: the shell still
    exports the first one's endpoints and stack, but `--local` (and the notification's undo line, pasted)
    goes to the replay's, which is the one running."""
    up = lifeguard("local", "up", env=env)
    assert up.returncode == 0, up.stderr
    shell = exported(env, up.stdout)
    streams = [str(STREAMS / f"article-terminate-{name}.jsonl") for name in ("loop", "node-reports")]
    kept = lifeguard("replay", "--keep", "--json", "--mode", "quarantine", *streams, env=shell)
    assert kept.returncode == 0, kept.stderr
    (applied,) = [
        e["detail"] for e in json.loads(kept.stdout)["events"] if e["detail-type"] == "RemediationApplied"
    ]
    status = lifeguard("status", "--local", "--json", env=shell)
    assert status.returncode == 0, status.stderr
    (row,) = json.loads(status.stdout)["groups"]
    assert (row["compute_node_group_id"], row["mode"]) == ("pcs_abcdef01", "quarantine")
    program, *arguments = shlex.split(applied["undo"])
    assert program == "lifeguard"
    preview = lifeguard(*arguments, "--dry-run", env=shell)
    assert preview.returncode == 0, preview.stderr
    assert "dry run: nothing changed" in preview.stdout


_HANDED_OVER = """
import sys, time
from lifeguard_cli.local import background

def work(ready):
    print("kept: the local AWS serves on", flush=True)
    time.sleep(1.5)  # the command is interrupted meanwhile
    ready({"environ": {}, "table": None, "stack_name": "pcs-lifeguard-local", "mode": "notify"})
    background.serve_until_stopped()

sys.exit(background.in_background(work))
"""


def test_a_local_aws_said_kept_stays_kept_when_its_command_is_interrupted_before_it_is_up(
    env: dict[str, str],
) -> None:
    """Ctrl-C on `replay --keep` after it said "kept", before its local AWS was up: the new one wrote its
    state, found the command gone (a broken pipe) and tore itself down, the state with it, and the one it
    had replaced was stopped already: "kept", and nothing left. What was said kept is kept."""
    import signal

    command = subprocess.Popen(
        [sys.executable, "-c", _HANDED_OVER],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert command.stdout is not None
    assert command.stdout.readline().startswith("kept:")
    command.send_signal(signal.SIGINT)
    command.communicate(timeout=60)
    state_file = Path(env["LIFEGUARD_LOCAL_STATE"])
    deadline = time.monotonic() + 30
    while not state_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # a child torn down by the broken pipe would take its state with it by now
    state = json.loads(state_file.read_text())
    try:
        assert alive(state["pid"])
        assert lifeguard("local", "down", env=env).returncode == 0
    finally:
        if alive(state["pid"]):
            os.kill(state["pid"], signal.SIGTERM)
