"""Shared fixtures: recorded events by name, and the local AWS (moto server + local PCS) over loopback."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import lifeguard.group_state

# Regex strategies are slow to warm up on a 2-core machine; correctness, not speed, is under test here.
settings.register_profile("lifeguard", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("lifeguard")

# Every claim that a write changed a group's launches and outcomes alone is checked, in every test that
# writes one: a state changed beyond them fails the test instead of losing the change.
lifeguard.group_state.CHECK_MAPS_ONLY = True

# `--local` goes first to a local AWS `lifeguard local up` left running (its state file under the user's
# cache): the tests' own local AWS must win over one a developer has up while the tests run.
_LOCAL_STATE_DIR = tempfile.mkdtemp(prefix="lifeguard-tests-")
atexit.register(shutil.rmtree, _LOCAL_STATE_DIR, True)
os.environ["LIFEGUARD_LOCAL_STATE"] = str(Path(_LOCAL_STATE_DIR) / "local.json")

REPO = Path(__file__).resolve().parent.parent
EVENTS = REPO / "events"
ARTICLE_SCRIPTS = EVENTS / "node" / "scripts"
# The suspect the article's TERMINATE loop is attributed to, as controller events carry it.
ARTICLE_SUSPECT = {
    "stage": "nodeBootstrapped",
    "script": "fail-terminate",
    "on_error": "TERMINATE",
    "exit_code": 1,
    "log_tail": "intentional failure for verification\n",
    "instances": ["i-059b4b99b4f2e9739", "i-06644f6e5a2b001c9"],
}
NODE_PYTHON = REPO / ".venv" / "node39" / "bin" / "python"  # Python 3.9 + boto3, as on the node (setup.sh)


def applied_event(
    detail_type: str = "RemediationApplied", *, revision: int = 1, episode: str = "ep-1"
) -> dict[str, Any]:
    """A controller event of the article's loop quarantined (RemediationApplied, unless told otherwise)."""
    from lifeguard.event_contract import make_detail

    cluster, group = "pcs_abc123de45", "pcs_abcdef01"
    failure = {
        "instance_id": "i-059b4b99b4f2e9739",
        "scheduler_node_id": "lca-static-1",
        "event_timestamp": 1792545162000,
    }
    detail = make_detail(
        episode_id=episode,
        cluster_id=cluster,
        compute_node_group_id=group,
        kind="loop",
        failures=[failure],
        suspect={**ARTICLE_SUSPECT, "instances": [failure["instance_id"]]},
        mode="quarantine",
        action="quarantine",
        diff=[{"path": "stages.nodeBootstrapped[0].onError", "old": "TERMINATE", "new": "STOP_SEQUENCE"}],
        reason="Applied quarantine.",
        undo=f"lifeguard undo {group} --cluster {cluster}",
        revision=revision,
    )
    return {"detail-type": detail_type, "source": "lifeguard", "detail": detail}


def tuned_config(checksum: str) -> str:
    """A config of one EVERY_BOOT script pinned by `checksum` (the same location whatever the checksum:
    two of them are an update in place)."""
    source = {"scriptLocation": "s3://bkt/tune.sh", "checksum": checksum}
    script = {"name": "tune", "scriptSource": source, "executionPolicy": "EVERY_BOOT", "onError": "CONTINUE"}
    return json.dumps({"stages": {"nodeBootstrapped": [script]}})


def load_event(name: str) -> Any:
    """A JSON file under events/ by its relative name, e.g. `configs/article-terminate.json`."""
    return json.loads((EVENTS / name).read_text())


@pytest.fixture(scope="session")
def local() -> Iterator[Any]:
    """One local AWS for the session; tests make their own resources (ids are unique)."""
    from lifeguard_cli.local import local_aws

    with local_aws() as aws:
        yield aws
