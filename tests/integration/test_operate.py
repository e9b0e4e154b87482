"""`lifeguard status`, `history` and `undo` as an operator runs them (`--local`), after a real remediation."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard.aws.pcs import PcsGateway
from lifeguard.bounds import utc
from lifeguard.event_contract import make_detail
from lifeguard.group_state import Episode, GroupState, KnownConfig, Suspect
from lifeguard.lifecycle import fingerprint_of
from lifeguard.remediation import RemediationSettings
from lifeguard.store.groups import GroupStore, UnreadableStateError
from lifeguard.store.remediations import RemediationStore
from lifeguard.wiring import build_remediate
from lifeguard_cli import cli
from lifeguard_cli.local import LocalPcs, serve_local_pcs
from lifeguard_cli.local.stack import create_deployed_stack
from tests.conftest import load_event
from tests.integration.conftest import deploy, on_a_terminal

pytestmark = pytest.mark.integration
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
TERMINATE = load_event("configs/article-terminate.json")
GOOD = load_event("configs/article-reverted.json")
# What status, history and undo say on stderr while AWS takes over a second to answer (`cli._working`).
PROGRESS = {f"{cli._READING}…", "undoing…"}


@dataclass
class Env:
    environ: dict[str, str]
    api: Any
    pcs: LocalPcs | None = None
    ledgers: RemediationStore | None = None  # the stack's ledgers, as its functions read them

    def run(self, *args: str, local: bool = True) -> subprocess.CompletedProcess[str]:
        """The command's answer, but for the progress lines a loaded machine shows on stderr while AWS is
        read for over a second (`test_an_aws_that_does_not_answer_is_said_on_stderr_within_seconds`
        holds them): what it says, and an error's one line, are what the tests look at."""
        done = subprocess.run(
            [str(LIFEGUARD), *args, *(["--local"] if local else [])],
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        said = [line for line in done.stderr.splitlines(keepends=True) if line.rstrip("\n") not in PROGRESS]
        done.stderr = "".join(said)
        return done

    def config(self) -> Any:
        group = self.api.get_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)
        return group["computeNodeGroup"]["nodeLifecycleActions"]


@pytest.fixture
def env(local: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    pcs = LocalPcs(update_seconds=0)
    with serve_local_pcs(pcs) as server:
        pcs.add_cluster("lca", cluster_id=CLUSTER)
        group = pcs.add_compute_node_group(
            CLUSTER,
            "lca-static",
            group_id=GROUP,
            node_lifecycle_actions=TERMINATE,
            tags={"lifeguard:mode": "quarantine"},
        )
        deployed = deploy(local, monkeypatch, server.endpoint_url, "op")
        stack, wiring = deployed.stack, deployed.wiring
        modified = int(group["modifiedAt"].timestamp() * 1000)
        state = GroupState(cluster_id=CLUSTER, group_id=GROUP)
        state.config = KnownConfig(
            modified_at=modified,
            fingerprint=fingerprint_of(TERMINATE),
            tags={"lifeguard:mode": "quarantine"},
            checked_at=0,
        )
        state.episode = Episode(
            episode_id="ep-7",
            kind="loop",
            opened_at=modified,
            failures=[],
            config_fingerprint=fingerprint_of(TERMINATE),
            config_modified_at=modified,
        )
        wiring.store.save(state)
        controller = build_remediate(
            wiring,
            settings=RemediationSettings(default_mode="quarantine"),
            pcs=PcsGateway(aws_client("pcs", server.endpoint_url, attempts=1)),
        )
        detail = make_detail(
            episode_id="ep-7",
            cluster_id=CLUSTER,
            compute_node_group_id=GROUP,
            kind="loop",
            suspect={"stage": "nodeBootstrapped", "script": "fail-terminate", "on_error": "TERMINATE"},
            config_fingerprint=fingerprint_of(TERMINATE),
            config_modified_at=modified,
        )
        (applied,) = controller.handle_event({"detail-type": "BootstrapLoopDetected", "detail": detail})
        assert applied.detail_type == "RemediationApplied"
        environ = {
            **os.environ,
            **local.environ(),
            "AWS_ENDPOINT_URL_PCS": server.endpoint_url,
            "LIFEGUARD_TABLE": stack.table,
            # No local AWS of `lifeguard local up` on this machine is found by --local.
            "LIFEGUARD_LOCAL_STATE": os.devnull,
        }
        ledgers = RemediationStore(wiring.store.client, wiring.store.table)
        yield Env(environ, aws_client("pcs", server.endpoint_url), pcs, ledgers)


def test_status_shows_the_group_its_mode_open_episode_and_last_action(env: Env) -> None:
    done = env.run("status", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["groups"]
    assert (row["cluster_id"], row["compute_node_group_id"], row["mode"]) == (CLUSTER, GROUP, "quarantine")
    assert row["compute_node_group_name"] == "lca-static"  # as PCS lists it: the name people know it by
    assert row["open_episode"]["episode_id"] == "ep-7"
    assert (row["last_action"]["decision"], row["last_action"]["action"]) == ("applied", "quarantine")
    # Every time of the document in epoch ms, as records and events give them (not seconds beside ms).
    opened, acted = row["open_episode"]["opened_at"], row["last_action"]["at"]
    assert isinstance(acted, int)
    assert abs(acted - opened) < 24 * 3600 * 1000
    assert f"{CLUSTER}/{GROUP}: 1 entry\n" in env.run("history", GROUP).stdout  # not "1 entries"
    table = env.run("status", "--cluster", CLUSTER)
    assert GROUP in table.stdout
    wide = Env({**env.environ, "COLUMNS": "200"}, env.api).run("status", "--cluster", CLUSTER).stdout
    assert f"lca-static ({GROUP})" in wide
    assert "applied quarantine" in " ".join(table.stdout.split())  # wrapped at 80 columns
    assert env.pcs is not None
    env.pcs.add_cluster("other", cluster_id="pcs_other")
    other = env.run("status", "--cluster", "pcs_other").stdout
    assert "Lifeguard has seen no compute node group of cluster pcs_other." in other
    # A cluster PCS does not know (a typo) is not "nothing to show": it is said, exit 1.
    typo = env.run("status", "--cluster", "pcs_nosuch")
    assert (typo.returncode, typo.stderr) == (
        1,
        "lifeguard status: no cluster pcs_nosuch in PCS, nor in Lifeguard's table (it knows clusters by id: "
        "lifeguard status --local lists them)\n",  # the same stack's (it was told without --local)
    )


def test_status_says_which_change_stands_behind_a_later_skip(env: Env, local: Any) -> None:
    """A detection of the same episode after the quarantine was skipped ("already remediated"): the last
    action is that skip, and the quarantine that holds the group still is said beside it, not hidden."""
    from lifeguard.remediation import AuditEntry
    from lifeguard.store.remediations import RemediationStore

    store = RemediationStore(local.client("dynamodb"), env.environ["LIFEGUARD_TABLE"])
    (applied,) = store.history(CLUSTER, GROUP)
    later = AuditEntry(
        at=applied.at + 360, decision="skipped", episode_id="ep-7", revision=2, reason="Already"
    )
    store.audit(CLUSTER, GROUP, later)
    (row,) = json.loads(env.run("status", "--json").stdout)["groups"]
    assert row["last_action"]["decision"] == "skipped"
    standing = row["standing_change"]
    assert (standing["action"], standing["episode_id"]) == ("quarantine", "ep-7")
    assert abs(standing["at"] - applied.at * 1000) < 1000  # the ledger's time of the change, epoch ms
    wide = Env({**env.environ, "COLUMNS": "200"}, env.api).run("status").stdout
    assert "skipped; quarantine of " in wide
    assert " stands" in wide
    assert standing["holds"] is True
    assert "last action (UTC)" in wide
    # Someone put another configuration in place since, as Lifeguard last read the group: the quarantine
    # is still its last change not undone, but it stands no more.
    from lifeguard_cli.operate import epoch_ms

    states = GroupStore(local.client("dynamodb"), env.environ["LIFEGUARD_TABLE"])
    state = states.load(CLUSTER, GROUP)
    held = state.config
    assert held is not None
    replaced_at = epoch_ms(applied.at) + 60_000
    state.config = held.model_copy(update={"fingerprint": "f" * 64, "modified_at": replaced_at})
    states.save(state)
    (row,) = json.loads(env.run("status", "--json").stdout)["groups"]
    assert row["standing_change"]["holds"] is False
    wide = Env({**env.environ, "COLUMNS": "200"}, env.api).run("status").stdout
    assert "replaced since by another configuration" in " ".join(wide.split())
    assert " stands" not in wide
    state = states.load(CLUSTER, GROUP)
    state.config = held
    states.save(state)
    env.run("undo", GROUP, "--yes")  # undone: nothing stands
    (row,) = json.loads(env.run("status", "--json").stdout)["groups"]
    assert row["standing_change"] is None


def test_status_shows_the_mode_of_the_groups_tags_as_they_are_now(env: Env) -> None:
    """A tag set after Lifeguard last read the group is the mode its functions act in next (they read the
    tags again before they act): status shows it, and a tag it cannot take is named at once."""
    arn = env.api.get_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)[
        "computeNodeGroup"
    ]["arn"]
    env.api.tag_resource(resourceArn=arn, tags={"lifeguard:mode": "revert"})
    (row,) = json.loads(env.run("status", "--json").stdout)["groups"]
    assert (row["mode"], row["mode_source"], row["mode_problem"]) == ("revert", "tag", None)
    assert (row["tags_from"], row["in_pcs"]) == ("pcs", True)
    # Tags PCS will not give (the operator's role lacks the grant): the last read, and said so.
    assert env.pcs is not None
    env.pcs.inject_fault("AccessDeniedException", operation="ListTagsForResource", times=1)
    refused = env.run("status", "--json")
    (row,) = json.loads(refused.stdout)["groups"]
    assert (row["mode"], row["tags_from"]) == ("quarantine", "table")  # as Lifeguard last read them
    assert refused.stderr.splitlines() == [
        "lifeguard status: the mode of 1 group(s) is from the tags Lifeguard last read, not as they are "
        "now: PCS answered AccessDeniedException (grant pcs:ListTagsForResource)"
    ]
    # PCS throttling past botocore's retries: no grant mends that (it was told as one).
    env.pcs.inject_fault("ThrottlingException", operation="ListTagsForResource", times=5)  # every attempt
    throttled = env.run("status", "--json")
    assert json.loads(throttled.stdout)["groups"][0]["tags_from"] == "table"
    assert throttled.stderr.splitlines() == [
        "lifeguard status: the mode of 1 group(s) is from the tags Lifeguard last read, not as they are "
        "now: PCS answered ThrottlingException (PCS is throttling or unavailable: run it again in a minute)"
    ]
    env.api.tag_resource(resourceArn=arn, tags={"lifeguard:mode": "bogus"})
    (row,) = json.loads(env.run("status", "--json").stdout)["groups"]
    # The tag decided, failing closed: not the default (quarantine, above), which "default" said it was.
    assert (row["mode"], row["mode_source"]) == ("notify", "tag")
    assert "bogus" in row["mode_problem"]


def test_a_group_deleted_in_pcs_is_said_gone_not_a_grant_to_give(env: Env) -> None:
    """A group deleted since Lifeguard last read it: PCS answers ResourceNotFoundException for its tags,
    which status told as a grant to give (pcs:ListTagsForResource), and its row looked like any other."""
    env.api.delete_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)
    done = env.run("status", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["groups"]
    assert (row["in_pcs"], row["tags_from"], row["mode"]) == (False, "table", "quarantine")
    assert done.stderr.splitlines() == [
        f"lifeguard status: 1 group(s) no longer in PCS (deleted since Lifeguard last read them): {GROUP}; "
        "shown as Lifeguard last recorded them"
    ]
    shown = " ".join(Env({**env.environ, "COLUMNS": "200"}, env.api).run("status").stdout.split())
    assert f"{GROUP} (no longer in PCS) quarantine" in shown
    # Its cluster by name (PCS still has the cluster): its history, as by the group's id alone.
    by_name = env.run("history", GROUP, "--cluster", "lca")
    assert (by_name.returncode, f"{CLUSTER}/{GROUP}: 1 entry" in by_name.stdout) == (0, True), by_name.stderr
    undone = env.run("undo", GROUP, "--dry-run")
    assert (undone.returncode, undone.stderr) == (
        1,
        f"lifeguard undo: {GROUP} is no longer in cluster {CLUSTER} (PCS): nothing to undo\n",
    )


def test_undo_puts_back_the_config_from_before_and_the_history_shows_both(env: Env) -> None:
    preview = env.run("undo", GROUP, "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert "onError STOP_SEQUENCE → TERMINATE" in preview.stdout
    assert "dry run: nothing changed" in preview.stdout
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"  # a time in a sentence says its zone
    assert re.search(rf"undoes quarantine of {when} \(episode ep-7\)", preview.stdout)
    # The kept node goes with the undo: said before anything changes.
    replaced = "PCS drains the group's running nodes and replaces them with nodes that boot the configuration"
    assert replaced in " ".join(preview.stdout.split())
    # Should the group loop on after the undo, Lifeguard holds back (`Undone: …`): said before, too.
    episode = json.loads(env.run("status", "--json").stdout)["groups"][0]["open_episode"]["episode_id"]
    left = f"then Lifeguard leaves episode {episode} to people (a fix, or the group's lifeguard:mode tag"
    assert left in " ".join(preview.stdout.split())
    # The episode is open: what the undo brings back is the configuration its nodes failed on.
    back = f"episode {episode} is not over: its nodes failed on the configuration put back, and new nodes"
    assert back in " ".join(preview.stdout.split())
    assert "a node kept for debugging among them" in " ".join(preview.stdout.split())  # a quarantine's
    narrow = Env({**env.environ, "COLUMNS": "60"}, env.api).run("undo", GROUP, "--dry-run").stdout
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert " ".join(narrow.split()) == " ".join(preview.stdout.split())  # wrapped between words alone
    assert env.config()["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"
    asked = env.run("undo", GROUP)  # no terminal to ask on, and no --yes
    assert asked.returncode == 2
    assert asked.stderr == "lifeguard undo: this changes the group in PCS: pass --yes to confirm\n"
    assert env.config()["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"
    done = env.run("undo", GROUP, "--yes")
    assert done.returncode == 0, done.stderr
    assert env.config() == TERMINATE
    again = env.run("undo", GROUP, "--yes")
    assert again.returncode == 1
    assert again.stderr.strip() == f"lifeguard undo: Lifeguard has no change of {GROUP} to undo"
    history = json.loads(env.run("history", GROUP, "--json").stdout)
    assert [(e["decision"], e["actor"]) for e in history["entries"]] == [
        ("applied", "lifeguard"),
        ("undo", "operator"),
    ]
    shown = " ".join(Env({**env.environ, "COLUMNS": "200"}, env.api).run("status").stdout.split())
    assert " undo" in shown
    assert "undo undo" not in shown  # the decision and the action of an undo are one word
    assert history["entries"][1]["config_after"] == TERMINATE
    assert all(isinstance(e["at"], int) and e["at"] > 10**12 for e in history["entries"])  # epoch ms
    assert "undo" in env.run("history", f"{CLUSTER}/{GROUP}").stdout
    # The latest entries alone, as a group with months of them is read.
    latest = json.loads(env.run("history", GROUP, "--last", "1", "--json").stdout)["entries"]
    assert [(e["decision"], e["actor"]) for e in latest] == [("undo", "operator")]
    assert env.run("history", GROUP, "--last", "0").returncode == 2


def test_undo_of_an_episode_that_is_over_says_no_loop_comes_back(env: Env, local: Any) -> None:
    """The loop ended (a node booted clean on Lifeguard's configuration): the undo's preview says nothing
    of a loop coming back, nor of Lifeguard leaving an episode that is over to people."""
    store = GroupStore(local.client("dynamodb"), env.environ["LIFEGUARD_TABLE"])
    state = store.load(CLUSTER, GROUP)
    state.last_episode, state.episode = state.episode, None
    store.save(state)
    preview = " ".join(env.run("undo", GROUP, "--dry-run").stdout.split())
    assert "onError STOP_SEQUENCE → TERMINATE" in preview
    assert "PCS drains the group's running nodes" in preview
    assert "is not over" not in preview
    assert "to people" not in preview
    # Another loop of the group open since: the episode the undo is of is still over.
    undone = state.last_episode
    assert undone is not None
    state.episode = replace(undone, episode_id=f"{undone.episode_id}-later")
    store.save(state)
    later = " ".join(env.run("undo", GROUP, "--dry-run").stdout.split())
    assert "onError STOP_SEQUENCE → TERMINATE" in later
    assert f"episode {undone.episode_id} is not over" not in later


def test_undo_refuses_when_someone_changed_the_group_since_unless_forced(env: Env) -> None:
    env.api.update_compute_node_group(
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=GOOD
    )
    refused = env.run("undo", GROUP, "--yes")
    assert refused.returncode == 1
    # What --force would do, and how to see it first: their change is what it would undo.
    # The command it gives runs against the same table and PCS as the one refused (it left out --local,
    # and would have gone to the default stack and region).
    shows = f"lifeguard undo {GROUP} --cluster {CLUSTER} --local --dry-run --force"
    assert (
        "someone else changed it; --force would put back the configuration from before over theirs "
        f"({shows} shows it first)"
    ) in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    pasted = env.run(*shows.split()[1:], local=False)
    assert pasted.returncode == 0, pasted.stderr
    assert "--force puts the old configuration back anyway" in " ".join(pasted.stdout.split())
    assert env.config() == GOOD
    forced = env.run("undo", GROUP, "--force", "-y")
    assert forced.returncode == 0, forced.stderr
    assert env.config() == TERMINATE


def test_local_without_a_local_endpoint_is_one_clear_line(env: Env) -> None:
    env.environ.pop("AWS_ENDPOINT_URL")
    done = env.run("status")
    assert done.returncode == 1  # what the machine lacks, not bad usage
    assert done.stderr.splitlines() == [
        "lifeguard status: --local needs a local AWS: lifeguard local up (or replay --keep), or "
        "AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_PCS pointing at one on loopback"
    ]
    unknown = env.run("history", "pcs_nosuchgroup")
    assert unknown.returncode == 1  # the same missing endpoint, found before anything else
    [said] = unknown.stderr.splitlines()
    assert said.startswith("lifeguard history: --local needs a local AWS: ")


def test_an_aws_that_does_not_answer_is_said_on_stderr_within_seconds() -> None:
    """An endpoint that takes the connection and never answers: each call may wait its five attempts of
    20 s. The command says on stderr what it is waiting for, once a second has gone by."""
    import socket
    import threading
    import time

    held: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.2)

        def take() -> None:
            with contextlib.suppress(OSError):
                while len(held) < 20:
                    with contextlib.suppress(TimeoutError):
                        held.append(server.accept()[0])

        threading.Thread(target=take, daemon=True).start()
        endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        environ = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ENDPOINT_URL_PCS": endpoint,
            "LIFEGUARD_TABLE": "lifeguard-state",
            "LIFEGUARD_LOCAL_STATE": os.devnull,
        }
        running = subprocess.Popen(
            [str(LIFEGUARD), "status", "--local"],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60  # its start (Python, boto3) is slow on a busy machine
        while not held and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.5)  # waiting on the endpoint for more than the second after which it says so
        running.kill()
        _, err = running.communicate(timeout=30)
        for connection in held:
            connection.close()
    assert held  # it did reach the endpoint, which never answered
    assert "reading Lifeguard's stack, table and PCS…" in err


@pytest.mark.parametrize("table", [None, "lifeguard-state"], ids=["stack", "table"])
def test_an_aws_that_cannot_be_reached_is_one_line_naming_the_region_and_the_endpoint_set(
    table: str | None,
) -> None:
    """A stale AWS_ENDPOINT_URL (a local AWS since stopped), a region with no endpoint, no network."""
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LIFEGUARD_"))},
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_MAX_ATTEMPTS": "1",
    }
    where = ["--table", table] if table else []
    done = subprocess.run(
        [str(LIFEGUARD), "status", "--region", "us-east-1", *where],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    [line] = [line for line in done.stderr.splitlines() if not line.startswith("reading ")]
    assert line.startswith("lifeguard status: "), line
    assert "cannot reach AWS (" in line
    assert line.endswith(
        "check --region and the network; AWS_ENDPOINT_URL sends every call to http://127.0.0.1:9: is it up "
        "(lifeguard local up), or unset it"
    )


def test_an_unknown_group_is_one_clear_line(env: Env) -> None:
    done = env.run("history", "nosuchgroup")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "lifeguard history: no compute node group nosuchgroup in Lifeguard's table; "
        "check the name or id, or pass --cluster"
    )
    # An id may be right and only unseen: not "check the name or id".
    unseen = env.run("undo", "pcs_nosuchgroup", "--dry-run")
    assert unseen.returncode == 1
    assert unseen.stderr.strip() == (
        "lifeguard undo: Lifeguard has seen no compute node group pcs_nosuchgroup: it acted on none by that "
        "id (pass --cluster to look it up in PCS)"
    )
    # A cluster's id given as the group (status lists both): said as what it is, and how to see its groups.
    cluster = env.run("history", CLUSTER)
    assert (cluster.returncode, cluster.stderr) == (
        1,
        f"lifeguard history: {CLUSTER} is a cluster, not a compute node group: lifeguard status --cluster "
        f"{CLUSTER} --local lists its groups\n",  # the same stack's (it was told without --local)
    )
    # A cluster PCS does not know is named as what is wrong, not the group in it.
    other = env.run("history", GROUP, "--cluster", "no-such-cluster")
    assert (other.returncode, other.stderr) == (
        1,
        "lifeguard history: no cluster no-such-cluster in PCS; check --cluster\n",
    )
    # An id PCS does not have (a typo, a notification of another account): PCS answers it as a missing
    # grant, which was said as one ("grant it to the credentials in use"); the same for undo.
    for command in (("history", GROUP), ("undo", GROUP, "--dry-run")):
        typo = env.run(*command, "--cluster", "pcs_zzzzzzzzzz")
        assert (typo.returncode, typo.stderr) == (
            1,
            f"lifeguard {command[0]}: no cluster pcs_zzzzzzzzzz in PCS; check --cluster\n",
        )


def test_status_and_history_tell_a_contained_loop_from_a_resolved_one(env: Env) -> None:
    store = GroupStore(
        aws_client("dynamodb", env.environ["AWS_ENDPOINT_URL"]), env.environ["LIFEGUARD_TABLE"]
    )
    state = store.load(CLUSTER, GROUP)
    assert state.episode is not None
    state.episode.contained_at = state.episode.opened_at + 600_000
    state.episode.kept = ["i-0c4d5e6f7a8b9c0d1"]
    store.save(state)
    done = env.run("status", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["groups"]
    assert row["open_episode"]["kept"] == ["i-0c4d5e6f7a8b9c0d1"]
    assert row["open_episode"]["contained_at"] == state.episode.contained_at
    env.environ["COLUMNS"] = "200"  # the row on one line, its cells in order
    table = env.run("status")
    assert "contained, not fixed: 1 kept" in " ".join(table.stdout.split())
    history = env.run("history", GROUP, "--cluster", CLUSTER, "--json")
    assert history.returncode == 0, history.stderr
    decisions = [entry["decision"] for entry in json.loads(history.stdout)["entries"]]
    assert decisions == ["applied", "contained"]
    assert "resolved" not in decisions
    # The containment, read off the state, has no revision of its own: none is made up (it read `r0`).
    shown = env.run("history", GROUP, "--cluster", CLUSTER).stdout
    assert " r0" not in shown
    assert "ep-7 r1" in shown  # the quarantine's own entry, as its event


def test_history_says_how_an_episode_ended(env: Env) -> None:
    """Every resolution read "a node bootstrapped with no failed script", that of a configuration that no
    longer holds the script too (no node had booted: the next ones may be failing on another script), and
    that of a node whose reports never came (whose scripts no one knows)."""
    store = GroupStore(
        aws_client("dynamodb", env.environ["AWS_ENDPOINT_URL"]), env.environ["LIFEGUARD_TABLE"]
    )
    env.environ["COLUMNS"] = "250"
    state = store.load(CLUSTER, GROUP)
    episode = state.episode
    assert episode is not None
    episode.suspect = Suspect(stage="nodeBootstrapped", script="fail-terminate", on_error="TERMINATE")
    episode.resolved_at = episode.opened_at + 900_000  # the new configuration's time: no node
    state.episode, state.last_episode = None, episode
    store.save(state)
    ended = " ".join(env.run("history", GROUP, "--cluster", CLUSTER).stdout.split())
    assert "bootstrapped" not in ended
    when = utc(episode.resolved_at)
    assert f"resolved: the configuration of {when} no longer holds nodeBootstrapped/fail-terminate" in ended
    state = store.load(CLUSTER, GROUP)
    assert state.last_episode is not None
    state.last_episode.resolved_by = "i-0a1b2c3d4e5f60718"
    store.save(state)
    ended = " ".join(env.run("history", GROUP, "--cluster", CLUSTER).stdout.split())
    assert "resolved: i-0a1b2c3d4e5f60718 bootstrapped successfully" in ended
    assert "no failed script" not in ended


def stack_outputs(local: Any, stack_name: str) -> dict[str, str]:
    """The outputs of a stack of the local AWS, by key."""
    [stack] = local.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    return {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}


def test_the_stack_names_the_table_and_its_default_mode_and_dry_run(env: Env, local: Any) -> None:
    deployed = create_deployed_stack(
        local.client, f"op-{uuid.uuid4().hex[:8]}", parameters={"DefaultMode": "quarantine", "DryRun": "true"}
    )
    GroupStore(local.client("dynamodb"), deployed.stack.table).save(
        GroupState(cluster_id=CLUSTER, group_id=GROUP)
    )
    environ = {k: v for k, v in env.environ.items() if k != "LIFEGUARD_TABLE"}
    done = Env(environ, env.api).run("status", "--stack-name", deployed.stack_name, "--json", local=False)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    outputs = stack_outputs(local, deployed.stack_name)
    assert document["stack"] == {
        "stack_name": deployed.stack_name,
        "region": "us-east-1",
        "default_mode": "quarantine",
        "dry_run": True,
        # Where the events and notifications go, as the stack's outputs say (no Slack webhook given).
        "event_bus": outputs["EventBusName"],
        "notification_topic": outputs["NotificationTopicArn"],
        "slack": False,
        "alarm_topic": outputs["AlarmTopicArn"],
        "parked_events_queue": outputs["ParkedEventsQueueUrl"],
        "failed_batches_queue": outputs["FailedBatchesQueueUrl"],
    }
    (row,) = document["groups"]
    # Untagged: the stack's DefaultMode, not this shell's; a mode a program can compare, and its source.
    assert (row["mode"], row["mode_source"], row["mode_problem"]) == ("quarantine", "default", None)
    table = Env(environ, env.api).run("status", "--stack-name", deployed.stack_name, local=False)
    assert "quarantine (default)" in table.stdout  # people read where it came from in the table
    assert " ".join(table.stdout.split()).startswith(
        f"stack {deployed.stack_name} (us-east-1): DefaultMode quarantine, DryRun true (every mode only says"
    )
    said = " ".join(table.stdout.split())
    assert f"notifications: SNS {outputs['NotificationTopicArn']} (no Slack webhook); alarms: " in said
    assert f"parked events (inspect and redrive): {outputs['ParkedEventsQueueUrl']}" in said
    # However narrow the terminal, an ARN and a queue's URL each stay on one line, to be copied whole.
    narrow = Env({**environ, "COLUMNS": "40"}, env.api).run(
        "status", "--stack-name", deployed.stack_name, local=False
    )
    lines = narrow.stdout.splitlines()
    for whole in (outputs["NotificationTopicArn"], outputs["AlarmTopicArn"], outputs["ParkedEventsQueueUrl"]):
        assert any(whole in line for line in lines), (whole, lines)
    missing = Env(environ, env.api).run("status", "--stack-name", "no-such-stack", local=False)
    assert missing.returncode == 1
    assert missing.stderr.startswith("lifeguard status: no stack no-such-stack in us-east-1: ")
    assert len(missing.stderr.splitlines()) == 1


def test_the_region_is_region_then_aws_region_then_aws_default_region(env: Env, local: Any) -> None:
    """As the AWS CLI takes it: `AWS_REGION` before `AWS_DEFAULT_REGION` (boto3 alone reads only the
    second), and `--region` before both."""
    deployed = create_deployed_stack(local.client, f"op-{uuid.uuid4().hex[:8]}")
    environ = {k: v for k, v in env.environ.items() if k not in {"LIFEGUARD_TABLE", "AWS_REGION"}}
    environ = {**environ, "AWS_CONFIG_FILE": os.devnull, "AWS_DEFAULT_REGION": "eu-west-1"}
    stack = ("status", "--stack-name", deployed.stack_name, "--json")
    elsewhere = Env(environ, env.api).run(*stack, local=False)
    assert elsewhere.stderr.startswith(f"lifeguard status: no stack {deployed.stack_name} in eu-west-1: ")
    found = Env({**environ, "AWS_REGION": "us-east-1"}, env.api).run(*stack, local=False)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["stack"]["region"] == "us-east-1"
    told = Env({**environ, "AWS_REGION": "us-east-1"}, env.api).run(
        *stack, "--region", "eu-west-1", local=False
    )
    assert told.stderr.startswith(f"lifeguard status: no stack {deployed.stack_name} in eu-west-1: ")


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ({"AWS_PROFILE": "nope"}, "lifeguard status: no AWS profile 'nope' in the AWS configuration"),
        ({"AWS_REGION": "", "AWS_DEFAULT_REGION": ""}, "lifeguard status: no AWS region: pass --region"),
    ],
    ids=["unknown-profile", "no-region"],
)
def test_a_missing_profile_or_region_is_one_line_and_debug_shows_the_traceback(
    env: Env, setting: dict[str, str], line: str
) -> None:
    environ = {k: v for k, v in env.environ.items() if not k.startswith(("AWS_REGION", "AWS_DEFAULT_REGION"))}
    environ = {**environ, "AWS_CONFIG_FILE": os.devnull, **{k: v for k, v in setting.items() if v}}
    done = Env(environ, env.api).run("status", local=False)
    assert done.returncode == 1
    assert done.stderr.startswith(line), done.stderr
    assert len(done.stderr.splitlines()) == 1
    debug = Env(environ, env.api).run("--debug", "status", local=False)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr


@pytest.mark.parametrize(
    ("code", "line"),
    [
        (
            "AccessDeniedException",
            "lifeguard undo: UpdateComputeNodeGroup was denied: injected AccessDeniedException (grant it to "
            "the credentials in use, or pass --profile)\n",
        ),
        (
            "ExpiredTokenException",
            "lifeguard undo: UpdateComputeNodeGroup: the AWS credentials are expired or invalid "
            "(ExpiredTokenException); refresh them\n",
        ),
    ],
    ids=["denied", "expired"],
)
def test_a_call_aws_refuses_is_one_line_naming_what_to_grant_or_refresh(
    env: Env, code: str, line: str
) -> None:
    assert env.pcs is not None
    env.pcs.inject_fault(code, operation="UpdateComputeNodeGroup", times=10)
    done = env.run("undo", GROUP, "--cluster", CLUSTER, "--yes")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", line)
    assert env.config()["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"  # as remediated


@pytest.mark.parametrize("code", ["ThrottlingException", "ConflictException"])
def test_an_undo_pcs_throttled_or_refused_for_a_conflict_is_not_taken_for_made(env: Env, code: str) -> None:
    """PCS takes nothing it answers so: the undo was left set out ("it may have been made"), and every
    decision after read it as done, leaving the episode to people while the group held the quarantine."""
    assert env.pcs is not None
    env.pcs.inject_fault(code, operation="UpdateComputeNodeGroup", times=10)
    done = env.run("undo", GROUP, "--cluster", CLUSTER, "--yes")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"lifeguard undo: PCS did not take the undo of {GROUP} ({code}): nothing was undone; run lifeguard "
        "undo again in a minute\n"
    )
    assert env.config()["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"  # as remediated
    assert env.ledgers is not None
    [undo] = [change for change in env.ledgers.ledger(CLUSTER, GROUP).changes if change.action == "undo"]
    assert undo.status == "abandoned"  # not pending: no decision reads it as the operator's undo
    again = env.run("undo", GROUP, "--cluster", CLUSTER, "--dry-run")  # the quarantine is still to undo
    assert again.returncode == 0, again.stderr
    assert "undoes quarantine" in again.stdout


def test_a_change_whose_answer_was_lost_and_the_group_changed_since_is_not_told_never_made(env: Env) -> None:
    """A quarantine PCS took, its answer lost (the change left set out), then the group edited: undo said
    it was "never taken by PCS", and with an earlier change and --force let it go as abandoned, so the
    rails forgot a change that was made. Whether PCS made it is not known: said, and nothing undone."""
    assert env.ledgers is not None
    ledger = env.ledgers.ledger(CLUSTER, GROUP)
    [quarantine] = [change for change in ledger.changes if change.action == "quarantine"]
    quarantine.status = "pending"
    env.ledgers.save_ledger(CLUSTER, GROUP, ledger)
    edited = env.config()
    edited["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    env.api.update_compute_node_group(
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=edited
    )
    for force in ([], ["--force"]):
        done = env.run("undo", GROUP, "--cluster", CLUSTER, "--yes", *force)
        assert done.returncode == 1
        assert "whether PCS made it is not known" in done.stderr, done.stderr
        assert "never taken" not in done.stderr
    assert env.config() == edited
    [after] = [c for c in env.ledgers.ledger(CLUSTER, GROUP).changes if c.action == "quarantine"]
    assert after.status == "pending"


def test_debug_may_follow_the_command_and_a_stack_name_cloudformation_refuses_is_bad_usage(env: Env) -> None:
    environ = {**env.environ, "LIFEGUARD_LOCAL_STATE": os.devnull}
    environ.pop("AWS_ENDPOINT_URL")
    told = Env(environ, env.api).run("status", "--debug")  # as `lifeguard --debug status`
    assert told.returncode == 1
    assert "Traceback (most recent call last)" in told.stderr
    assert "OperatorError: --local needs a local AWS" in told.stderr
    bad = Env(environ, env.api).run("history", GROUP, "--stack-name", "bad name", local=False)
    assert bad.returncode == 2
    assert "'bad name' is not a stack name" in bad.stderr
    arn = "arn:aws:cloudformation:us-east-1:123456789012:stack/pcs-lifeguard/0a1b2c3d-4e5f"
    assert "is not a stack name" not in Env(environ, env.api).run("status", "--stack-name", arn).stderr


def test_a_region_set_empty_is_no_region_not_an_internal_error(env: Env) -> None:
    """`AWS_DEFAULT_REGION=` (set, empty) made botocore build https://cloudformation..amazonaws.com."""
    environ = {k: v for k, v in env.environ.items() if k not in {"AWS_REGION", "AWS_DEFAULT_REGION"}}
    environ = {**environ, "AWS_CONFIG_FILE": os.devnull, "AWS_REGION": "", "AWS_DEFAULT_REGION": ""}
    done = Env(environ, env.api).run("status", local=False)
    assert done.returncode == 1
    assert done.stderr.startswith("lifeguard status: no AWS region: pass --region"), done.stderr


def test_version_and_short_help(env: Env) -> None:
    version = env.run("--version", local=False)
    assert (version.returncode, version.stdout) == (0, "lifeguard 0.1.0\n")
    short = env.run("-h", local=False)
    assert short.returncode == 0
    assert "status" in short.stdout
    assert env.run("undo", "-h", local=False).stdout == env.run("undo", "--help", local=False).stdout
    assert env.run("no-such-command", local=False).returncode == 2


def test_groups_and_clusters_are_taken_by_name_as_pcs_takes_them(env: Env) -> None:
    by_name = env.run("history", "lca-static", "--json")
    assert by_name.returncode == 0, by_name.stderr
    document = json.loads(by_name.stdout)
    assert (document["cluster_id"], document["compute_node_group_id"]) == (CLUSTER, GROUP)
    both = json.loads(env.run("history", "lca/lca-static", "--json").stdout)
    assert both["compute_node_group_id"] == GROUP
    (row,) = json.loads(env.run("status", "--cluster", "lca", "--json").stdout)["groups"]
    assert row["compute_node_group_id"] == GROUP
    unknown = env.run("status", "--cluster", "no-such-cluster", "--json")
    assert (unknown.returncode, unknown.stdout) == (1, "")
    # --cluster and CLUSTER/GROUP: the same cluster by name and by id, or a refusal naming both.
    same = json.loads(env.run("history", f"{CLUSTER}/lca-static", "--cluster", "lca", "--json").stdout)
    assert same["compute_node_group_id"] == GROUP
    two = env.run("undo", "lca/lca-static", "--cluster", "no-such-cluster", "--dry-run")
    assert (two.returncode, two.stderr) == (  # bad usage, as enroll says it (README: exit 2)
        2,
        "lifeguard undo: --cluster no-such-cluster and lca/lca-static name two clusters; give one\n",
    )
    assert env.run("history", "lca/lca-static", "--cluster", "no-such-cluster", "--json").returncode == 2
    missing = env.run("history", "nope", "--cluster", "lca")
    assert missing.returncode == 1
    assert missing.stderr == "lifeguard history: no compute node group nope in cluster lca (PCS)\n"


def test_a_group_by_name_where_a_cluster_lifeguard_knew_refuses_to_be_asked_is_never_picked_in_silence(
    env: Env, local: Any
) -> None:
    """A group's state is kept after its cluster is deleted, and PCS answers AccessDenied for a cluster id
    it does not have (as for one the caller may not read): a name looked up in every cluster Lifeguard
    knows stopped at that cluster with PCS's refusal. A deleted cluster (PCS no longer lists it) is passed
    over; one PCS lists and refused may hold a group of that name too: where the name is and which cluster
    refused are said rather than one picked (an undo of the wrong group); with --cluster it is found."""
    assert env.pcs is not None
    store = GroupStore(local.client("dynamodb"), env.environ["LIFEGUARD_TABLE"])
    known = store.load(CLUSTER, GROUP)
    store.save(replace(known, cluster_id="pcs_000000old0", group_id="pcs_000000old1", version=0))
    env.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup", times=1)
    found = env.run("history", "lca-static", "--json")  # the deleted cluster passed over
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["cluster_id"] == CLUSTER
    env.pcs.add_cluster("other", cluster_id="pcs_000000liv0")  # PCS lists it; the caller may not read it
    store.save(replace(known, cluster_id="pcs_000000liv0", group_id="pcs_000000liv1", version=0))
    env.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup", times=1)
    ambiguous = env.run("undo", "lca-static", "--dry-run")
    assert (ambiguous.returncode, ambiguous.stderr) == (
        1,
        f"lifeguard undo: lca-static is in cluster {CLUSTER}, and PCS refused to be asked in pcs_000000liv0, "
        f"which may hold one of that name too; pass --cluster {CLUSTER}\n",
    )
    found = env.run("history", "lca-static", "--cluster", CLUSTER, "--json")
    assert found.returncode == 0, found.stderr
    document = json.loads(found.stdout)
    assert (document["cluster_id"], document["compute_node_group_id"]) == (CLUSTER, GROUP)
    env.pcs.inject_fault("AccessDeniedException", operation="GetComputeNodeGroup", times=1)
    missing = env.run("history", "nope")
    assert (missing.returncode, missing.stderr) == (
        1,
        "lifeguard history: no compute node group nope in Lifeguard's table (PCS refused to be asked in "
        "pcs_000000liv0); check the name or id, or pass --cluster\n",
    )


def test_tables_fit_the_width_wrap_between_words_and_carry_no_padding(env: Env) -> None:
    narrow = env.run("history", GROUP)
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert all(line == line.rstrip() for line in lines)
    words = set(narrow.stdout.split())
    assert {"STOP_SEQUENCE", "fail-terminate"} <= {w.strip("(),;:") for w in words}  # no word broken
    env.environ["COLUMNS"] = "200"
    wide = env.run("status", "--cluster", CLUSTER).stdout.splitlines()
    assert len(wide) == 2  # the header and the group's row, unwrapped
    assert 80 < max(len(line) for line in wide) <= 200


@pytest.mark.parametrize(("answer", "changed"), [("n", False), ("y", True)])
def test_undo_on_a_terminal_shows_the_change_and_asks_first(env: Env, answer: str, changed: bool) -> None:
    done = on_a_terminal([str(LIFEGUARD), "undo", GROUP, "--local"], answer, env=env.environ)
    assert (
        "onError STOP_SEQUENCE → TERMINATE" in done.stderr
    )  # the prompt is on stderr: stdout is the result's
    assert "Put this configuration back? [y/N]" in done.stderr
    asked = " ".join(done.stderr.split())
    assert asked.index("PCS drains the group's running nodes") < asked.index("Put this configuration back?")
    assert (done.returncode, env.config() == TERMINATE) == ((0, True) if changed else (1, False))
    assert ("nothing changed" in done.stderr) is not changed
    assert done.stdout.rstrip().endswith("applied") is changed
    assert not done.stdout.startswith(" ")  # the prompt's space too is on stderr, not in the result


def test_undo_at_its_prompt_ended_by_ctrl_d_or_ctrl_c_says_nothing_changed(env: Env) -> None:
    """The end of input (Ctrl-D) or Ctrl-C at the prompt is a no, said as one; Ctrl-C exits 130 as it does
    anywhere else, not with Click's "Aborted!"."""
    import signal
    import time

    ended = on_a_terminal([str(LIFEGUARD), "undo", GROUP, "--local"], "\x04", env=env.environ)
    assert (ended.returncode, ended.stderr.splitlines()[-1]) == (1, "nothing changed")
    assert "Aborted" not in ended.stderr
    leader, follower = os.openpty()
    try:
        asking = subprocess.Popen(
            [str(LIFEGUARD), "undo", GROUP, "--local"],
            stdin=follower,
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env.environ,
            text=True,
        )
        assert asking.stderr is not None
        said = ""
        deadline = time.monotonic() + 60
        while "Put this configuration back?" not in said and time.monotonic() < deadline:
            said += asking.stderr.read(1)
        asking.send_signal(signal.SIGINT)
        _, rest = asking.communicate(timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert asking.returncode == 130
    assert (said + rest).splitlines()[-1] == "nothing changed"
    assert "Aborted" not in said + rest
    assert env.config()["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"


def test_local_never_reaches_beyond_loopback_whatever_the_shell_says(env: Env) -> None:
    env.environ.update(
        AWS_ENDPOINT_URL_DYNAMODB="https://dynamodb.us-east-1.amazonaws.com",
        AWS_IGNORE_CONFIGURED_ENDPOINT_URLS="true",
        AWS_ACCESS_KEY_ID="AKIAREALLOOKINGKEY00",
    )
    env.environ["AWS_PROFILE"] = "no-such-profile"  # nor the shell's, which this machine does not have
    done = env.run("status", "--json", "--profile", "prod")  # --local: the profile is not used
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["groups"][0]["compute_node_group_id"] == GROUP
    env.environ["AWS_ENDPOINT_URL_PCS"] = "https://pcs.us-east-1.amazonaws.com"
    refused = env.run("history", GROUP)
    assert refused.returncode == 1
    [said] = refused.stderr.splitlines()
    assert said.startswith("lifeguard history: --local needs a local AWS")


def test_undo_makes_only_the_change_that_was_shown(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    from lifeguard_cli.operate import OperatorError, open_operator

    monkeypatch.setenv("AWS_ENDPOINT_URL_PCS", env.environ["AWS_ENDPOINT_URL_PCS"])
    operator = open_operator(table=env.environ["LIFEGUARD_TABLE"], local=True)
    shown = operator.undo(GROUP, dry_run=True)
    assert not shown.applied
    env.api.update_compute_node_group(  # while the person reads the prompt
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=GOOD
    )
    with pytest.raises(OperatorError, match="changed while you were asked: nothing was undone"):
        operator.undo(GROUP, force=True, shown=shown)
    assert env.config() == GOOD


def test_undo_overwrites_no_change_made_between_its_read_and_its_write(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The undo read the group once, then its ledger, the episode and its lock, then wrote: a colleague's
    hand fix made meanwhile was replaced by the configuration that looped, even without --force."""
    from lifeguard_cli.operate import OperatorError, open_operator

    monkeypatch.setenv("AWS_ENDPOINT_URL_PCS", env.environ["AWS_ENDPOINT_URL_PCS"])
    operator = open_operator(table=env.environ["LIFEGUARD_TABLE"], local=True)
    api, reads = env.api, []

    class ColleagueFixesAfterTheFirstRead:
        def get_compute_node_group(self, **request: Any) -> Any:
            answer = api.get_compute_node_group(**request)
            reads.append(request)
            if len(reads) == 1:
                time.sleep(0.01)  # PCS's modifiedAt is in milliseconds
                api.update_compute_node_group(
                    clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=GOOD
                )
            return answer

        def __getattr__(self, name: str) -> Any:
            return getattr(api, name)

    operator._pcs_client = PcsGateway(ColleagueFixesAfterTheFirstRead())
    with pytest.raises(OperatorError, match="changed while the undo read it: nothing was undone"):
        operator.undo(GROUP, cluster_id=CLUSTER)
    assert env.config() == GOOD


def test_bad_usage_is_exit_2_before_any_call_and_a_missing_table_says_what_to_check(env: Env) -> None:
    for args in (("status", "--region", "us east"), ("history", "a/b/c"), ("history", "/x"), ("undo", "x!")):
        done = env.run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Error: Invalid value" in done.stderr
    assert (
        env.run("status", "--region", "").returncode == 0
    )  # `--region "$REGION"`, REGION unset: the default
    spoilt = subprocess.run(
        [str(LIFEGUARD), "status", "--local"],
        env={**env.environ, "LIFEGUARD_DEFAULT_MODE": "bogus"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (spoilt.returncode, spoilt.stdout) == (1, "")
    # On a loaded machine the reading took over a second, and said so first (`_working`): not the error's.
    said = [line for line in spoilt.stderr.splitlines() if not line.startswith("reading Lifeguard's stack")]
    assert len(said) == 1
    assert said[0].startswith("lifeguard status: LIFEGUARD_DEFAULT_MODE='bogus' is not valid")
    missing = env.run("status", "--table", "no-such-table")
    assert missing.returncode == 1
    assert missing.stderr == (
        "lifeguard status: Scan: no such table of Lifeguard's in this region: check --table (or "
        "$LIFEGUARD_TABLE), --stack-name and --region\n"
    )


def test_a_state_item_that_cannot_be_read_hides_no_other_group(env: Env) -> None:
    """An item no release of Lifeguard wrote (edited by hand, or damaged) is left out with one line naming
    it: the other groups are shown, not `internal error: KeyError: 'state'` for all of them."""
    dynamodb = aws_client("dynamodb", env.environ["AWS_ENDPOINT_URL"])
    table = env.environ["LIFEGUARD_TABLE"]
    dynamodb.put_item(
        TableName=table,
        Item={"pk": {"S": f"GROUP#{CLUSTER}#pcs_damaged01"}, "sk": {"S": "STATE"}, "version": {"N": "1"}},
    )
    done = env.run("status", "--json")
    assert done.returncode == 0, done.stderr
    assert [row["compute_node_group_id"] for row in json.loads(done.stdout)["groups"]] == [GROUP]
    assert done.stderr == (
        f"lifeguard status: left out a state item that cannot be read: GROUP#{CLUSTER}#pcs_damaged01: "
        "KeyError: 'state'\n"
    )
    store = GroupStore(dynamodb, table)
    with pytest.raises(
        UnreadableStateError, match="the state item of pcs_damaged01 cannot be read: KeyError"
    ):
        store.load(CLUSTER, "pcs_damaged01")


def test_status_tells_whether_the_stack_can_do_its_work(env: Env, local: Any) -> None:
    """An operator could not tell from status that events were parked, batches failed, nobody was
    subscribed to a topic or an alarm fired: status named the queue of parked events and nothing else."""
    deployed = create_deployed_stack(local.client, f"op-{uuid.uuid4().hex[:8]}")
    outputs = stack_outputs(local, deployed.stack_name)
    environ = {k: v for k, v in env.environ.items() if k != "LIFEGUARD_TABLE"}
    run = Env(environ, env.api).run

    def health() -> dict[str, Any]:
        done = run("status", "--stack-name", deployed.stack_name, "--json", local=False)
        assert done.returncode == 0, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)["health"]
        return found

    assert health() == {
        "read_max": 100,
        "parked_events": 0,
        "failed_batches": 0,
        "notification_subscribers": 0,
        "alarm_subscribers": 0,
        "alarms_firing": [],
        "unread": [],
    }
    sqs, sns, cloudwatch = local.client("sqs"), local.client("sns"), local.client("cloudwatch")
    sqs.send_message(QueueUrl=outputs["ParkedEventsQueueUrl"], MessageBody="{}")
    sqs.send_message(QueueUrl=outputs["FailedBatchesQueueUrl"], MessageBody="{}")
    sqs.send_message(QueueUrl=outputs["FailedBatchesQueueUrl"], MessageBody="{}")
    pager = sqs.create_queue(QueueName=f"{deployed.stack_name}-pager")["QueueUrl"]
    pager_arn = sqs.get_queue_attributes(QueueUrl=pager, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=outputs["AlarmTopicArn"], Protocol="sqs", Endpoint=pager_arn)
    firing = f"{deployed.stack_name}-ScalingEventsErrorsAlarm-ABC123"
    for name in (
        firing,
        f"another-stack-{deployed.stack_name}-ErrorsAlarm",
        f"{deployed.stack_name}-dev-ScalingEventsErrorsAlarm-DEF456",  # stack `<name>-dev`'s own, firing
        f"{deployed.stack_name}-QuietAlarm-GHI789",
    ):
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            Namespace="AWS/Lambda",
            MetricName="Errors",
            Statistic="Sum",
            Period=300,
            EvaluationPeriods=1,
            Threshold=0,
            ComparisonOperator="GreaterThanThreshold",
        )
        if "Quiet" not in name:
            cloudwatch.set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="test")
    assert health() == {
        "read_max": 100,
        "parked_events": 1,
        "failed_batches": 2,
        "notification_subscribers": 0,
        "alarm_subscribers": 1,
        "alarms_firing": [firing],  # the stack's own alarms only, and only those firing
        "unread": [],
    }
    table = run("status", "--stack-name", deployed.stack_name, local=False)
    assert table.returncode == 0, table.stderr
    said = " ".join(table.stdout.split())
    health_line = "health: parked events 1, failed batches 2; subscribers: notifications 0, alarms 1"
    assert f"{health_line}; alarms in ALARM: 1" in said
    assert (
        f"attention: 1 event(s) parked after every retry (remediations, notifications, reviews): inspect and "
        f"redrive them from {outputs['ParkedEventsQueueUrl']}" in said
    )
    assert f"their error and records are in {outputs['FailedBatchesQueueUrl']}" in said
    assert "attention: no one is subscribed to the notification topic and no Slack webhook is set" in said
    assert "no one is subscribed to the alarm topic" not in said
    assert f"attention: alarms in ALARM: {firing}" in said


def test_an_aws_errors_message_forges_no_line_and_no_escape(env: Env) -> None:
    """The message of an AWS answer was printed as it came: a line break in it forged a line of its own
    ("lifeguard undo: done, configuration restored"), and a terminal's escapes reached the terminal."""
    assert env.pcs is not None
    message = "bad\x1b[2J\x1b[H\nlifeguard undo: done, configuration restored\x1b[8m"
    env.pcs.inject_fault("ValidationException", operation="GetComputeNodeGroup", times=50, message=message)
    done = env.run("undo", GROUP, "--yes")
    env.pcs.clear_faults()
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "\x1b" not in line
    assert line.endswith("bad?[2J?[H⏎lifeguard undo: done, configuration restored?[8m")
