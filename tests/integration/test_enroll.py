"""`lifeguard enroll` as an operator runs it, against a local twin of the deployed stack (moto's
CloudFormation, S3, CloudWatch Logs) and the local PCS endpoint."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lifeguard.aws.clients import aws_client
from lifeguard_cli.lint import lint_files
from lifeguard_cli.local import LocalPcs, serve_local_pcs
from lifeguard_cli.local.stack import LocalDeployment, create_deployed_stack, publish_bundle
from tests.conftest import load_event
from tests.integration.conftest import Node, on_a_terminal
from tests.integration.test_node_bundle import FAKE_SYSTEMCTL, stop_shipper

pytestmark = pytest.mark.integration
LIFEGUARD = Path(sys.executable).parent / "lifeguard"
TERMINATE = load_event("configs/article-terminate.json")


@pytest.fixture(scope="module")
def deployed(local: Any) -> LocalDeployment:
    """One deployed stack for the module: enrolling reads it, never changes it."""
    return create_deployed_stack(local.client, f"enroll-{uuid.uuid4().hex[:8]}")


@dataclass
class Env:
    """A cluster with one group in a fresh local PCS, and the CLI run against it as an operator would."""

    environ: dict[str, str]
    pcs: LocalPcs
    api: Any
    cwd: Path
    deployed: LocalDeployment
    cluster_id: str
    group_id: str

    def add_group(self, name: str, actions: dict[str, Any] | None) -> str:
        group = self.pcs.add_compute_node_group(self.cluster_id, name, node_lifecycle_actions=actions)
        return str(group["id"])

    def run(self, *args: str, stack: bool = True, yes: bool = True) -> subprocess.CompletedProcess[str]:
        """`lifeguard enroll ARGS` with no terminal (so with --yes, unless told not to)."""
        stack_args = ["--stack-name", self.deployed.stack_name] if stack else []
        confirmed = ["--yes"] if yes else []
        return subprocess.run(
            [str(LIFEGUARD), "enroll", *args, *stack_args, *confirmed],
            env=self.environ,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def on_a_terminal(self, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`lifeguard enroll lca-static --cluster lca ARGS` on a terminal, `answer` typed when asked."""
        command = [str(LIFEGUARD), "enroll", "lca-static", "--cluster", "lca", *args]
        command += ["--stack-name", self.deployed.stack_name]
        return on_a_terminal(command, answer, env=self.environ, cwd=self.cwd)

    def config(self, group: str | None = None) -> Any:
        answer = self.api.get_compute_node_group(
            clusterIdentifier=self.cluster_id, computeNodeGroupIdentifier=group or self.group_id
        )
        return answer["computeNodeGroup"].get("nodeLifecycleActions")

    def updates(self) -> list[dict[str, Any]]:
        return [call.params for call in self.pcs.calls if call.operation == "UpdateComputeNodeGroup"]


@pytest.fixture
def env(
    local: Any, deployed: LocalDeployment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Env]:
    for key, value in local.environ().items():
        monkeypatch.setenv(key, value)
    pcs = LocalPcs(update_seconds=0)
    with serve_local_pcs(pcs) as server:
        cluster = pcs.add_cluster("lca")
        group = pcs.add_compute_node_group(cluster["id"], "lca-static", node_lifecycle_actions=TERMINATE)
        environ = {**os.environ, **local.environ(), "AWS_ENDPOINT_URL_PCS": server.endpoint_url}
        environ.pop("LIFEGUARD_STACK_NAME", None)
        cwd = tmp_path / "operator"
        cwd.mkdir()
        yield Env(
            environ,
            pcs,
            aws_client("pcs", server.endpoint_url),
            cwd,
            deployed,
            cluster["id"],
            group["id"],
        )


def shipper_entry(deployed: LocalDeployment) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(deployed.outputs["ShipperLifecycleEntry"])
    return entry


def test_enroll_puts_the_pinned_shipper_first_and_the_config_passes_the_lint(
    env: Env, tmp_path: Path
) -> None:
    done = env.run("lca-static", "--cluster", "lca", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["cluster_id"], result["compute_node_group_id"]) == (env.cluster_id, env.group_id)
    assert (result["action"], result["applied"]) == ("enroll", True)
    entry = shipper_entry(env.deployed)
    config = env.config()
    assert config["stages"]["nodeBootstrapped"] == [entry, *TERMINATE["stages"]["nodeBootstrapped"]]
    assert config["stages"]["nodeReady"] == TERMINATE["stages"]["nodeReady"]
    assert result["config_after"] == config
    assert result["diff"] == [{"path": "stages.nodeBootstrapped[0]", "old": None, "new": entry}]
    outputs = env.deployed.outputs
    assert result["pins"] == {
        "installer_location": outputs["ShipperInstallerLocation"],
        "installer_version_id": outputs["ShipperInstallerVersionId"],
        "installer_sha256": outputs["ShipperInstallerSha256"],
        "bundle_location": outputs["NodeBundleLocation"],
        "bundle_sha256": outputs["NodeBundleSha256"],
        "log_group": outputs["NodeReportLogGroupName"],
        "bundle_version_id": outputs["NodeBundleVersionId"],
    }
    (update,) = env.updates()
    assert update["clientToken"].startswith("lifeguard-enroll-")
    path = tmp_path / "enrolled.json"
    path.write_text(json.dumps(config))
    (linted,), errors = lint_files([path])
    assert errors == []
    assert linted.document.valid
    assert [r for r in linted.risks if r.path.startswith("stages.nodeBootstrapped[0]")] == []
    assert linted.to_dict()["scripts"][0]["pinned"] is True


def test_the_summary_names_the_pins_and_the_node_policy(env: Env) -> None:
    done = env.run(env.group_id, "--cluster", env.cluster_id)
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 80  # piped: 80 columns, between words
    said = " ".join(done.stdout.split())
    outputs = env.deployed.outputs
    assert "nodeBootstrapped › lifeguard-shipper: added" in said
    assert f"version {outputs['NodeBundleVersionId']} sha256 {outputs['NodeBundleSha256']}" in said
    assert f"version {outputs['ShipperInstallerVersionId']}" in said
    assert outputs["NodePolicyArn"] in said
    assert said.endswith("nodes launched from now on run it")
    # Wrapped between words only: what is copied (an ARN, an S3 location) stays whole on its line.
    env.environ["COLUMNS"] = "40"
    narrow = env.run(env.group_id, "--cluster", env.cluster_id, "--remove", "--dry-run").stdout
    narrow += env.run(env.group_id, "--cluster", env.cluster_id, "--remove").stdout
    narrow += env.run(env.group_id, "--cluster", env.cluster_id, "--dry-run").stdout
    assert outputs["NodePolicyArn"] in narrow.split()
    assert outputs["NodeBundleLocation"] in narrow.split()


def test_without_a_terminal_to_ask_on_enroll_changes_nothing_unless_told_yes(env: Env) -> None:
    """As `undo`: a change of a group in PCS is shown and asked for; in a script or a pipe, --yes says it."""
    done = env.run("lca-static", "--cluster", "lca", yes=False)
    assert done.returncode == 2
    assert done.stderr == "lifeguard enroll: this changes the group in PCS: pass --yes to confirm\n"
    assert env.config() == TERMINATE
    assert env.updates() == []
    assert env.run("lca-static", "--cluster", "lca").returncode == 0
    enrolled = env.config()
    done = env.run("lca-static", "--cluster", "lca", "--remove", yes=False)
    assert done.returncode == 2
    assert env.config() == enrolled


@pytest.mark.parametrize(("answer", "code"), [("y", 0), ("n", 1)])
def test_on_a_terminal_enroll_shows_the_change_and_asks(env: Env, answer: str, code: int) -> None:
    done = env.on_a_terminal(answer)
    assert done.returncode == code, done.stderr
    assert "nodeBootstrapped › lifeguard-shipper: added" in done.stderr
    assert "Make this change?" in done.stderr
    # The instance role's need is said before the change is agreed to, not only after.
    asked = " ".join(done.stderr.split("Make this change?")[0].split())
    assert f"instances need the managed policy {env.deployed.outputs['NodePolicyArn']}" in asked
    drained = "PCS drains the group's running nodes and replaces them with nodes that run it"
    assert drained in " ".join(done.stderr.split())  # asked knowing the running nodes go
    if answer == "y":
        assert done.stdout.rstrip().endswith("nodes launched from now on run it")
        assert env.config()["stages"]["nodeBootstrapped"][0] == shipper_entry(env.deployed)
    else:
        assert done.stderr.rstrip().endswith("nothing changed")
        assert env.config() == TERMINATE


def test_a_change_agreed_to_is_not_made_on_a_group_changed_while_asked(env: Env) -> None:
    from lifeguard.aws.pcs import PcsGateway
    from lifeguard_cli.enroll import EnrollError, ShipperEntry, change_enrollment

    pcs = PcsGateway(env.api)
    entry = ShipperEntry(json.loads(env.deployed.outputs["ShipperLifecycleEntry"]))
    shown = change_enrollment("enroll", pcs, entry, "lca-static", "lca", dry_run=True)
    changed = copy.deepcopy(TERMINATE)
    changed["stages"]["nodeBootstrapped"][0]["onError"] = "CONTINUE"
    env.api.update_compute_node_group(
        clusterIdentifier=env.cluster_id,
        computeNodeGroupIdentifier=env.group_id,
        nodeLifecycleActions=changed,
    )
    with pytest.raises(EnrollError, match="changed while you were asked: nothing changed; run again"):
        change_enrollment("enroll", pcs, entry, "lca-static", "lca", shown=shown)
    assert env.config() == changed


def test_a_group_of_a_cluster_outside_the_stacks_cluster_ids_is_not_enrolled(env: Env, local: Any) -> None:
    """With ClusterIds set, the stack looks for loops in those clusters alone: a group of another enrolled
    had its nodes' reports stored and never looked at, with nothing said. Its removal goes on (a stack
    redeployed without its cluster leaves the shipper to take out)."""
    from lifeguard.aws.pcs import PcsGateway
    from lifeguard_cli.enroll import EnrollError, ShipperEntry, change_enrollment

    pcs = PcsGateway(env.api)
    entry = ShipperEntry(json.loads(env.deployed.outputs["ShipperLifecycleEntry"]))
    with pytest.raises(
        EnrollError, match=r"cluster pcs_\w+ is not one of the stack's ClusterIds \(pcs_0fedcba987\)"
    ):
        change_enrollment("enroll", pcs, entry, "lca-static", "lca", dry_run=True, watched={"pcs_0fedcba987"})
    watched = change_enrollment(
        "enroll", pcs, entry, "lca-static", "lca", dry_run=True, watched={env.cluster_id}
    )
    assert watched.config_after["stages"]["nodeBootstrapped"][0] == shipper_entry(env.deployed)
    # The command reads the stack's ClusterIds parameter.
    name = f"listed-{uuid.uuid4().hex[:8]}"
    template = {
        "Parameters": {"ClusterIds": {"Type": "CommaDelimitedList", "Default": ""}},
        "Resources": {"Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": f"/{name}"}}},
        "Outputs": {"ShipperLifecycleEntry": {"Value": env.deployed.outputs["ShipperLifecycleEntry"]}},
    }
    local.client("cloudformation").create_stack(
        StackName=name,
        TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": "ClusterIds", "ParameterValue": "pcs_0fedcba987,pcs_0fedcba988"}],
    )
    done = env.run("lca-static", "--cluster", "lca", "--stack-name", name, "--dry-run", stack=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == (
        f"lifeguard enroll: cluster {env.cluster_id} is not one of the stack's ClusterIds "
        "(pcs_0fedcba987, pcs_0fedcba988): its nodes' reports would be stored and never looked at; deploy "
        "the stack with it in ClusterIds first"
    )
    with pytest.raises(EnrollError, match="does not run the shipper: nothing to remove"):  # not the cluster
        change_enrollment("remove", pcs, entry, "lca-static", "lca", dry_run=True, watched={"pcs_0fedcba987"})
    assert env.updates() == []


def test_the_summary_of_a_removal_says_new_nodes_run_without_the_shipper(env: Env) -> None:
    assert env.run("lca-static", "--cluster", "lca").returncode == 0
    removed = env.run("lca-static", "--cluster", "lca", "--remove")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.rstrip().endswith("nodes launched from now on run without it")
    said = " ".join(removed.stdout.split())
    assert "PCS drains the group's running nodes and replaces them with nodes that run without it" in said


def test_enrolling_twice_is_refused_and_changes_nothing(env: Env) -> None:
    assert env.run("lca-static", "--cluster", "lca").returncode == 0
    enrolled = env.config()
    again = env.run("lca-static", "--cluster", "lca")
    assert again.returncode == 1
    assert again.stderr.strip() == (
        f"lifeguard enroll: {env.group_id} already runs the shipper (stages.nodeBootstrapped[0] "
        "'lifeguard-shipper', the stack's current entry): nothing to do"
    )
    assert env.config() == enrolled
    assert len(env.updates()) == 1


@pytest.mark.parametrize("where", ["nodeBootstrapped", "nodeReady"])
def test_the_stacks_shipper_behind_another_script_is_moved_first(env: Env, where: str) -> None:
    """Behind a script that terminates the node, the shipper never runs in the boot whose failure its
    reports are for (in nodeReady, never in a nodeBootstrapped failure): such a group is not "already
    enrolled"."""
    entry = shipper_entry(env.deployed)
    scripts = TERMINATE["stages"]["nodeBootstrapped"]
    if where == "nodeBootstrapped":
        stages = {"nodeBootstrapped": [*scripts, entry]}
    else:
        stages = {"nodeBootstrapped": scripts, "nodeReady": [entry]}
    env.add_group("behind", {"stages": stages})
    done = env.run("behind", "--cluster", "lca")
    assert done.returncode == 0, done.stderr
    assert env.config("behind") == {"stages": {"nodeBootstrapped": [entry, *scripts]}}


@pytest.mark.parametrize(
    ("name", "location"),
    [
        ("lifeguard-shipper", "s3://other-bucket/tools/shipper.sh"),
        ("ship-reports", "s3://other-bucket/lifeguard/install-shipper.sh"),
    ],
)
def test_a_shipper_put_in_by_hand_is_recognised(env: Env, name: str, location: str) -> None:
    by_hand = {"name": name, "scriptSource": {"scriptLocation": location}, "onError": "CONTINUE"}
    actions = {"stages": {"nodeBootstrapped": [by_hand, *TERMINATE["stages"]["nodeBootstrapped"]]}}
    group = env.add_group("by-hand", actions)
    refused = env.run("by-hand", "--cluster", "lca")
    assert refused.returncode == 1
    assert "already runs the shipper (stages.nodeBootstrapped[0]" in refused.stderr
    # The command it names takes the group and the stack it was run for (it named neither).
    remove = (
        f"lifeguard enroll {group} --cluster {env.cluster_id} --remove --stack-name {env.deployed.stack_name}"
    )
    said = f"another version); to run the stack's: {remove}, then enroll again"
    assert said in refused.stderr
    removed = env.run(*remove.split()[2:], stack=False)
    assert removed.returncode == 0, removed.stderr
    assert env.config(group) == {"stages": {"nodeBootstrapped": TERMINATE["stages"]["nodeBootstrapped"]}}


def test_a_dry_run_shows_the_change_and_changes_nothing(env: Env) -> None:
    done = env.run("lca-static", "--cluster", "lca", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "nodeBootstrapped › lifeguard-shipper: added" in done.stdout
    assert done.stdout.rstrip().endswith("dry run: nothing changed")
    as_json = json.loads(env.run("lca-static", "--cluster", "lca", "--dry-run", "--json").stdout)
    assert (as_json["applied"], as_json["dry_run"]) == (False, True)
    assert as_json["config_after"]["stages"]["nodeBootstrapped"][0] == shipper_entry(env.deployed)
    assert env.config() == TERMINATE
    assert env.updates() == []


def test_remove_puts_back_the_scripts_as_they_were(env: Env) -> None:
    assert env.run("lca-static", "--cluster", "lca").returncode == 0
    preview = env.run("lca-static", "--cluster", "lca", "--remove", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert "nodeBootstrapped › lifeguard-shipper: removed" in preview.stdout
    assert env.config() != TERMINATE
    removed = env.run("lca-static", "--cluster", "lca", "--remove", "--json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["action"] == "remove"
    assert env.config() == TERMINATE
    assert env.updates()[-1]["clientToken"].startswith("lifeguard-remove-")
    again = env.run("lca-static", "--cluster", "lca", "--remove")
    assert again.returncode == 1
    assert again.stderr.strip() == (
        f"lifeguard enroll: {env.group_id} does not run the shipper: nothing to remove"
    )
    # Enrolling again after a removal is a new request, not the first one's cached answer.
    assert env.run("lca-static", "--cluster", "lca").returncode == 0
    assert env.config()["stages"]["nodeBootstrapped"][0] == shipper_entry(env.deployed)


def test_a_group_without_lifecycle_actions_gets_the_shipper_alone(env: Env) -> None:
    group = env.add_group("bare", None)
    done = env.run("bare", "--cluster", "lca")
    assert done.returncode == 0, done.stderr
    assert env.config(group) == {"stages": {"nodeBootstrapped": [shipper_entry(env.deployed)]}}
    assert json.loads(env.run("bare", "--cluster", "lca", "--dry-run", "--remove", "--json").stdout)[
        "config_after"
    ] == {"stages": {}}


def test_a_full_stage_is_refused(env: Env) -> None:
    script = TERMINATE["stages"]["nodeBootstrapped"][0]
    full = {"stages": {"nodeBootstrapped": [{**script, "name": f"step-{i}"} for i in range(20)]}}
    group = env.add_group("full", full)
    refused = env.run("full", "--cluster", "lca")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"lifeguard enroll: {group}'s nodeBootstrapped stage already holds 20 scripts, PCS's maximum: "
        "make room for the shipper first"
    )
    assert env.config(group) == full
    assert env.updates() == []


def test_an_unknown_group_is_one_clear_line(env: Env) -> None:
    done = env.run("no-such-group", "--cluster", "lca")
    assert done.returncode == 1
    assert done.stderr.strip() == "lifeguard enroll: no compute node group no-such-group in cluster lca"
    # A cluster PCS does not know is named, not the group (which it could not look for).
    done = env.run("lca-static", "--cluster", "nosuch")
    assert done.returncode == 1
    assert done.stderr.strip() == "lifeguard enroll: no cluster nosuch in PCS; check --cluster"
    # A cluster given as the group is said to be one, as `history` says it.
    done = env.run(env.cluster_id, "--cluster", "lca")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"lifeguard enroll: {env.cluster_id} is a cluster, not a compute node group: lifeguard status "
        f"--cluster {env.cluster_id} --stack-name {env.deployed.stack_name} lists its groups"
    )
    # PCS answers an id it does not have as a missing grant (AccessDeniedException): a group id of another
    # cluster, and a cluster id PCS has none of, were told "GetCluster was denied … grant it".
    other = env.pcs.add_cluster("other")
    elsewhere = env.pcs.add_compute_node_group(other["id"], "elsewhere", node_lifecycle_actions=TERMINATE)[
        "id"
    ]
    done = env.run(elsewhere, "--cluster", "lca")
    assert done.returncode == 1
    assert done.stderr.strip() == f"lifeguard enroll: no compute node group {elsewhere} in cluster lca"
    done = env.run("lca-static", "--cluster", "pcs_zzzzzzzzzz")
    assert done.returncode == 1
    assert done.stderr.strip() == "lifeguard enroll: no cluster pcs_zzzzzzzzzz in PCS; check --cluster"
    assert env.updates() == []


def test_a_missing_stack_is_one_line_and_a_non_zero_exit(env: Env) -> None:
    done = env.run("lca-static", "--cluster", "lca", "--stack-name", "no-such-stack", stack=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "lifeguard enroll: no stack no-such-stack in us-east-1: pass --stack-name (or LIFEGUARD_STACK_NAME), "
        "or --region"
    )
    assert env.updates() == []


def test_a_stack_without_the_entry_output_is_one_line(env: Env, local: Any) -> None:
    name = f"older-{uuid.uuid4().hex[:8]}"
    template = {
        "Resources": {"Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": f"/{name}"}}},
        "Outputs": {"StateTableName": {"Value": "t"}},
    }
    local.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))
    done = env.run("lca-static", "--cluster", "lca", "--stack-name", name, stack=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"lifeguard enroll: stack {name} (CREATE_COMPLETE, us-east-1) has no output ShipperLifecycleEntry: "
        "deploy this version of Lifeguard (sam build && sam deploy)"
    )


def test_the_stack_name_comes_from_samconfig_in_the_current_directory(env: Env) -> None:
    assert (
        env.run("lca-static", "--cluster", "lca", "--dry-run", stack=False).returncode == 1
    )  # pcs-lifeguard
    (env.cwd / "samconfig.toml").write_text(
        f'version = 0.1\n\n[default.global.parameters]\nstack_name = "{env.deployed.stack_name}"\n'
    )
    done = env.run("lca-static", "--cluster", "lca", "--dry-run", stack=False)
    assert done.returncode == 0, done.stderr
    assert "dry run: nothing changed" in done.stdout
    # `sam deploy --guided` saves the name it was given under the deploy command's parameters, which win
    # over the global ones for `sam deploy`: they do here too.
    (env.cwd / "samconfig.toml").write_text(
        'version = 0.1\n\n[default.global.parameters]\nstack_name = "pcs-lifeguard"\n\n'
        f'[default.deploy.parameters]\nstack_name = "{env.deployed.stack_name}"\n'
    )
    done = env.run("lca-static", "--cluster", "lca", "--dry-run", stack=False)
    assert done.returncode == 0, done.stderr


def test_no_region_is_one_clear_line_and_samconfig_can_give_it(env: Env) -> None:
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        env.environ.pop(key, None)
    env.environ["AWS_CONFIG_FILE"] = str(env.cwd / "no-such-config")
    done = env.run("lca-static", "--cluster", "lca")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "lifeguard enroll: no AWS region: pass --region, set AWS_REGION, or give the profile a region"
    )
    with_region = env.run("lca-static", "--cluster", "lca", "--dry-run", "--region", "us-east-1")
    assert with_region.returncode == 0, with_region.stderr
    (env.cwd / "samconfig.toml").write_text(
        'version = 0.1\n\n[default.deploy.parameters]\nregion = "us-east-1"\n'
    )
    from_samconfig = env.run("lca-static", "--cluster", "lca", "--dry-run")
    assert from_samconfig.returncode == 0, from_samconfig.stderr


def test_an_unknown_profile_is_one_clear_line(env: Env) -> None:
    env.environ["AWS_CONFIG_FILE"] = str(env.cwd / "no-such-config")
    done = env.run("lca-static", "--cluster", "lca", "--profile", "nosuch")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "lifeguard enroll: no AWS profile 'nosuch' in the AWS configuration (aws configure list-profiles)"
    )


def test_no_credentials_is_one_clear_line(env: Env) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.environ.pop(key, None)
    env.environ.update(
        AWS_CONFIG_FILE=str(env.cwd / "no-such-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(env.cwd / "no-such-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    done = env.run("lca-static", "--cluster", "lca")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"lifeguard enroll: cannot read stack {env.deployed.stack_name} in us-east-1: no AWS credentials "
        "(pass --profile, or configure the AWS CLI)"
    )


def test_an_enrolled_node_installs_the_pinned_bundle_even_after_a_new_one_is_published(
    env: Env, node: Node, local: Any, tmp_path: Path
) -> None:
    assert env.run("lca-static", "--cluster", "lca").returncode == 0
    (shipper, *_) = env.config()["stages"]["nodeBootstrapped"]
    outputs = env.deployed.outputs
    later = tmp_path / "later.pyz"
    later.write_bytes(b"#!/usr/bin/env python3\n# a later bundle, published by a redeploy\n")
    republished = publish_bundle(
        local.client("s3"), env.deployed.bucket, env.deployed.log_group, bundle=later
    )
    assert republished["BundleVersionId"] != outputs["NodeBundleVersionId"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    node.env.update(
        PATH=f"{bin_dir}:{node.env['PATH']}",
        LIFEGUARD_INSTALL_ROOT=str(node.root),
        LIFEGUARD_PYTHON=sys.executable,
        LIFEGUARD_INSTANCE_ID="i-0aaaabbbbccccdddd",
        PCS_CLUSTER_ID=env.cluster_id,
        PCS_COMPUTE_NODE_GROUP_ID=env.group_id,
        PCS_NODE_ID="lca-static-1",
    )
    try:
        booted = node.boot({"stages": {"nodeBootstrapped": [shipper]}})
        assert booted.returncode == 0, booted.stderr
        [ran] = [r for r in node.executor_records() if r.get("message") == "script completed"]
        assert ran["script"] == "lifeguard-shipper"
        installed = (node.root / "opt/lifeguard/lifeguard-node.pyz").read_bytes()
        assert hashlib.sha256(installed).hexdigest() == outputs["NodeBundleSha256"]
        unit = (node.root / "etc/systemd/system/lifeguard-shipper.service").read_text()
        assert f'--log-group "{outputs["NodeReportLogGroupName"]}"' in unit
    finally:
        stop_shipper(node)


def test_a_script_of_the_groups_own_named_install_shipper_sh_is_not_taken_for_the_shipper(env: Env) -> None:
    """Only the stack's installer key (lifeguard/install-shipper.sh, in any bucket) or the shipper's name
    make a script Lifeguard's: an agent installer of the group's own with that file name is kept."""
    own = {
        "name": "fluentbit-agent",
        "scriptSource": {"scriptLocation": "https://downloads.example.com/fluent/install-shipper.sh"},
        "onError": "TERMINATE",
        "executionPolicy": "EVERY_BOOT",
    }
    group = env.add_group(
        "own-agent", {"stages": {"nodeBootstrapped": [*TERMINATE["stages"]["nodeBootstrapped"], own]}}
    )
    enrolled = env.run("own-agent", "--cluster", "lca")
    assert enrolled.returncode == 0, enrolled.stderr
    assert env.run("own-agent", "--cluster", "lca", "--remove").returncode == 0
    assert env.config(group)["stages"]["nodeBootstrapped"][-1] == own


def test_a_change_made_while_enrolling_is_not_overwritten(env: Env) -> None:
    """PCS has no conditional update: the group is read again right before it is written, and a change
    someone made since the first read stops the enrollment instead of being lost."""
    from lifeguard.aws.pcs import PcsGateway
    from lifeguard_cli.enroll import EnrollError, ShipperEntry, change_enrollment

    theirs = copy.deepcopy(TERMINATE)
    theirs["stages"]["nodeBootstrapped"].append(
        {"name": "mount-fsx", "scriptSource": {"scriptLocation": "s3://ops-bucket/mount-fsx.sh"}}
    )

    class Racing:
        """PCS as enroll sees it, with a colleague's update landing right after enroll's first read."""

        def __init__(self, api: Any) -> None:
            self._api, self._reads = api, 0

        def get_compute_node_group(self, **request: Any) -> Any:
            answer = self._api.get_compute_node_group(**request)
            self._reads += 1
            if self._reads == 1:
                time.sleep(0.01)  # modifiedAt is to the millisecond
                self._api.update_compute_node_group(
                    clusterIdentifier=request["clusterIdentifier"],
                    computeNodeGroupIdentifier=request["computeNodeGroupIdentifier"],
                    nodeLifecycleActions=theirs,
                )
            return answer

        def __getattr__(self, name: str) -> Any:
            return getattr(self._api, name)

    with pytest.raises(EnrollError, match="was changed by someone else meanwhile; nothing changed"):
        change_enrollment(
            "enroll",
            PcsGateway(Racing(env.api)),
            ShipperEntry(shipper_entry(env.deployed)),
            "lca-static",
            "lca",
        )
    assert env.config() == theirs


def test_a_group_not_active_is_said_so_by_the_dry_run_and_never_asked_about(env: Env) -> None:
    """The dry run of an UPDATING group said "dry run: nothing changed" and no more; asked, the person
    agreed to a change PCS then refused."""
    env.pcs.update_seconds = 600
    env.api.update_compute_node_group(
        clusterIdentifier=env.cluster_id,
        computeNodeGroupIdentifier=env.group_id,
        nodeLifecycleActions=TERMINATE,
    )
    env.pcs.calls.clear()
    dry = env.run("lca-static", "--cluster", "lca", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "the group is UPDATING: PCS takes no change until it is ACTIVE" in dry.stdout
    asked = env.on_a_terminal("y")
    assert asked.returncode == 1
    said = " ".join(asked.stderr.split())
    assert "the group is UPDATING: PCS takes no change until it is ACTIVE" in said
    assert "Make this change?" not in said
    assert said.endswith("nothing changed")
    assert env.updates() == []
