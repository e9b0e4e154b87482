"""`lifeguard status`, `history` and `undo` as an operator runs them (`--local`), after a real remediation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard.aws.pcs import PcsGateway
from lifeguard.event_contract import make_detail
from lifeguard.group_state import Episode, GroupState, KnownConfig
from lifeguard.lifecycle import fingerprint_of
from lifeguard.remediation import RemediationSettings
from lifeguard.store.groups import GroupStore
from lifeguard.wiring import build_remediate
from lifeguard_cli.local import LocalPcs, serve_local_pcs
from tests.conftest import load_event
from tests.integration.conftest import deploy

pytestmark = pytest.mark.integration
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
CLUSTER, GROUP = "pcs_abc123de45", "pcs_abcdef01"
TERMINATE = load_event("configs/article-terminate.json")
GOOD = load_event("configs/article-reverted.json")


@dataclass
class Env:
    environ: dict[str, str]
    api: Any

    def run(self, *args: str, local: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(LIFEGUARD), *args, *(["--local"] if local else [])],
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def config(self) -> Any:
        group = self.api.get_compute_node_group(clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP)
        return group["computeNodeGroup"]["nodeLifecycleActions"]


@pytest.fixture
def env(local: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    pcs = LocalPcs(update_seconds=0)
    with serve_local_pcs(pcs) as server:
        pcs.add_cluster("lca", cluster_id=CLUSTER)
        group = pcs.add_compute_node_group(
            CLUSTER, "lca-static", group_id=GROUP, node_lifecycle_actions=TERMINATE
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
        }
        yield Env(environ, aws_client("pcs", server.endpoint_url))


def test_status_shows_the_group_its_mode_open_episode_and_last_action(env: Env) -> None:
    done = env.run("status", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["groups"]
    assert (row["cluster_id"], row["compute_node_group_id"], row["mode"]) == (CLUSTER, GROUP, "quarantine")
    assert row["open_episode"]["episode_id"] == "ep-7"
    assert (row["last_action"]["decision"], row["last_action"]["action"]) == ("applied", "quarantine")
    table = env.run("status", "--cluster", CLUSTER)
    assert GROUP in table.stdout
    assert "applied quarantine" in table.stdout
    assert (
        "Lifeguard has seen no compute node group yet." in env.run("status", "--cluster", "pcs_other").stdout
    )


def test_undo_puts_back_the_config_from_before_and_the_history_shows_both(env: Env) -> None:
    preview = env.run("undo", GROUP, "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert "onError STOP_SEQUENCE → TERMINATE" in preview.stdout
    assert "dry run: nothing changed" in preview.stdout
    assert env.config()["stages"]["nodeBootstrapped"][0]["onError"] == "STOP_SEQUENCE"
    done = env.run("undo", GROUP)
    assert done.returncode == 0, done.stderr
    assert env.config() == TERMINATE
    again = env.run("undo", GROUP)
    assert again.returncode == 1
    assert again.stderr.strip() == f"lifeguard undo: Lifeguard has no change of {GROUP} to undo"
    history = json.loads(env.run("history", GROUP, "--json").stdout)
    assert [(e["decision"], e["actor"]) for e in history["entries"]] == [
        ("applied", "lifeguard"),
        ("undo", "operator"),
    ]
    assert history["entries"][1]["config_after"] == TERMINATE
    assert "undo" in env.run("history", f"{CLUSTER}/{GROUP}").stdout


def test_undo_refuses_when_someone_changed_the_group_since_unless_forced(env: Env) -> None:
    env.api.update_compute_node_group(
        clusterIdentifier=CLUSTER, computeNodeGroupIdentifier=GROUP, nodeLifecycleActions=GOOD
    )
    refused = env.run("undo", GROUP)
    assert refused.returncode == 1
    assert "someone else changed it; use --force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert env.config() == GOOD
    forced = env.run("undo", GROUP, "--force")
    assert forced.returncode == 0, forced.stderr
    assert env.config() == TERMINATE


def test_local_without_a_local_endpoint_is_one_clear_line(env: Env) -> None:
    env.environ.pop("AWS_ENDPOINT_URL")
    done = env.run("status")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "lifeguard: --local needs AWS_ENDPOINT_URL (and AWS_ENDPOINT_URL_PCS) pointing at a loopback AWS"
    )
    unknown = env.run("history", "pcs_nosuchgroup")
    assert unknown.returncode == 2  # the same missing endpoint, found before anything else


def test_an_unknown_group_is_one_clear_line(env: Env) -> None:
    done = env.run("history", "pcs_nosuchgroup")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "lifeguard history: no compute node group pcs_nosuchgroup in Lifeguard's table; "
        "check the id or pass --cluster"
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
    table = env.run("status")
    assert "contained, not fixed: 1 kept" in " ".join(table.stdout.split())
    history = env.run("history", GROUP, "--cluster", CLUSTER, "--json")
    assert history.returncode == 0, history.stderr
    decisions = [entry["decision"] for entry in json.loads(history.stdout)["entries"]]
    assert decisions == ["applied", "contained"]
    assert "resolved" not in decisions
