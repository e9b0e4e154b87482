"""Scenario files of `lifeguard simulate`: every value bounded, every problem one line naming the key."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifeguard_cli.simulate.scenario import (
    BUILT_IN,
    FAULT_KINDS,
    ScenarioError,
    StackSettings,
    Timings,
    built_in_scenarios,
    load_scenario,
    parse_scenario,
)

ARTICLE = BUILT_IN / "article-loop.yaml"


def article() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ARTICLE.read_text())
    return data


def refused(data: Any) -> str:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, Path("s.yaml"))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_every_built_in_scenario_loads_with_its_scripts_and_a_description() -> None:
    names = [path.stem for path in built_in_scenarios()]
    assert {"article-loop", "article-stop-sequence", "healthy-scale-up", "bad-change-revert"} <= set(names)
    assert {"quarantine-escalation", "intermittent", "capacity-shortage"} <= set(names)
    assert {"quarantine-drain-replaced", "wave-50"} <= set(names)
    for path in built_in_scenarios():
        scenario = load_scenario(path)
        assert scenario.description, path.name
        named = {
            entry["scriptSource"]["scriptLocation"].removeprefix("s3://sim-scripts/")
            for spec in [*scenario.groups, *scenario.changes]
            for stage in spec.config["stages"].values()
            for entry in stage
        }
        assert named <= set(scenario.scripts), path.name


def test_a_script_named_in_the_scenarios_bucket_that_it_does_not_hold_is_said_by_where() -> None:
    """A typo in a script's name looked like a fetch failure the scenario meant: the nodes failed to fetch
    it, and nothing said why. It is said (the run goes on: a scenario may mean it)."""
    data = article()
    assert parse_scenario(data, Path("s.yaml")).unknown_scripts() == []
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"][0]["scriptSource"]["scriptLocation"] = (
        "s3://sim-scripts/fial.sh"
    )
    data["changes"] = [{"at_minute": 5, "group": "lca-static", "config": data["groups"][0]["config"]}]
    assert parse_scenario(data, Path("s.yaml")).unknown_scripts() == [
        f"{where}: nodeBootstrapped › fail-terminate names s3://sim-scripts/fial.sh, which is not among "
        "the scenario's scripts: its nodes fail to fetch it"
        for where in ("groups[0] (lca-static)", "the change at minute 5 (lca-static)")
    ]


def test_a_script_in_another_bucket_is_said_too() -> None:
    """A configuration pasted from a real cluster names its own bucket, which the twin's S3 does not hold:
    its nodes failed to fetch the script and nothing said why (a typo in the scenario's bucket was said)."""
    data = article()
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"][0]["scriptSource"]["scriptLocation"] = (
        "s3://my-cluster-scripts/bootstrap/fail.sh"
    )
    assert parse_scenario(data, Path("s.yaml")).unknown_scripts() == [
        "groups[0] (lca-static): nodeBootstrapped › fail-terminate names "
        "s3://my-cluster-scripts/bootstrap/fail.sh, outside the scenario's bucket (s3://sim-scripts/), "
        "the only one the twin's S3 holds: its nodes fail to fetch it"
    ]


def test_a_built_in_scenario_is_found_by_name_and_a_json_file_by_path(tmp_path: Path) -> None:
    assert load_scenario("article-loop").name == "article TERMINATE loop"
    copy = tmp_path / "mine.json"
    copy.write_text(json.dumps(article()))
    scenario = load_scenario(copy)
    assert scenario.groups[0].name == "lca-static"
    assert scenario.timings == Timings()
    assert scenario.stack == StackSettings()
    assert scenario.replace_drained_nodes is True


def test_scripts_dir_is_read_relative_to_the_scenario(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "fail.sh").write_text("#!/bin/bash\nexit 1\n")
    data = article()
    del data["scripts"]
    data["scripts_dir"] = "scripts"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    assert load_scenario(tmp_path / "s.yaml").scripts == {"fail.sh": b"#!/bin/bash\nexit 1\n"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(colour="red"), "s.yaml: colour: unknown key"),
        (lambda d: d.update(horizon_minutes=0), "s.yaml: horizon_minutes: 0 is out of range: from 1 to 1440"),
        (lambda d: d.update(horizon_minutes=True), "s.yaml: horizon_minutes: must be a number"),
        (
            lambda d: d["groups"][0].update(min=101),
            "s.yaml: groups[0].min: 101 is out of range: from 0 to 100",
        ),
        (lambda d: d["groups"][0].update(max=0), "s.yaml: groups[0].max: 0 is out of range: from 1 to 100"),
        (lambda d: d["groups"][0].update(name="pcs_x"), "s.yaml: groups[0].name: 'pcs_x' is not a PCS"),
        (
            lambda d: d["groups"].append(dict(d["groups"][0])),
            "s.yaml: groups[1].name: 'lca-static' is named twice",
        ),
        (lambda d: d.update(groups=[]), "s.yaml: groups: at least one group"),
        (
            lambda d: d["groups"][0]["config"]["stages"]["nodeBootstrapped"][0].update(onError="EXPLODE"),
            "s.yaml: groups[0].config.stages.nodeBootstrapped[0].onError",
        ),
        (
            lambda d: d.update(
                changes=[{"at_minute": 5, "group": "nobody", "config": d["groups"][0]["config"]}]
            ),
            "s.yaml: changes[0].group: 'nobody' is not a group of the scenario",
        ),
        (
            lambda d: d.update(
                changes=[{"at_minute": 61, "group": "lca-static", "config": d["groups"][0]["config"]}]
            ),
            "s.yaml: changes[0].at_minute: 61 is out of range: from 0 to 60",
        ),
        (lambda d: d.update(faults=[{"at_minute": 1, "kind": "meteor"}]), "s.yaml: faults[0].kind: 'meteor'"),
        (
            lambda d: d.update(faults=[{"at_minute": 1, "kind": "slack_error", "status": 418}]),
            "s.yaml: faults[0].status: must be 429, 500 or 503",
        ),
        (
            lambda d: d.update(faults=[{"at_minute": 1, "kind": "pcs_error", "seconds": 5}]),
            "s.yaml: faults[0].seconds: not a key of a pcs_error fault",
        ),
        (lambda d: d.update(timings={"boot": 5}), "s.yaml: timings.boot: unknown timing"),
        (lambda d: d.update(timings={"register": -1}), "s.yaml: timings.register: -1 is out of range"),
        (lambda d: d.update(stack={"Threshold": 0}), "s.yaml: stack.Threshold: 0 is out of range: from 1"),
        (lambda d: d.update(stack={"Region": "x"}), "s.yaml: stack.Region: not a stack parameter"),
        (lambda d: d.update(scripts={"../up.sh": "x"}), "s.yaml: scripts.../up.sh: a script's file name"),
        (
            lambda d: d.update(replace_drained_nodes="yes"),
            "s.yaml: replace_drained_nodes: must be true or false",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_the_file_and_the_key(change: Any, message: str) -> None:
    data = article()
    change(data)
    assert refused(data).startswith(message)


def test_a_group_refused_for_its_own_problem_is_still_one_its_changes_and_faults_name() -> None:
    """A group out of range made its change and its fault name "not a group of the scenario" too: a
    second, false problem."""
    data = article()
    data["groups"][0].update(min=120)
    data["changes"] = [{"at_minute": 5, "group": "lca-static", "config": data["groups"][0]["config"]}]
    data["faults"] = [
        {"at_minute": 1, "until_minute": 9, "kind": "insufficient_capacity", "group": "lca-static"}
    ]
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, Path("s.yaml"))
    assert caught.value.problems == ["s.yaml: groups[0].min: 120 is out of range: from 0 to 100"]


def test_every_problem_of_one_fault_is_said_at_once() -> None:
    """The scenarios' README: a scenario that cannot be run fails with every problem at once. Two problems
    of one fault came one run at a time (its status, then its times)."""
    data = article()
    data["faults"] = [
        {"kind": "slack_error", "at_minute": 0, "times": 0, "status": 404, "colour": "red"},
        {"kind": "log_delay", "at_minute": 1, "until_minute": 0.5, "seconds": -1},
        {"kind": "pcs_error", "at_minute": 1, "times": 101, "operation": "Nope"},
    ]
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, Path("s.yaml"))
    assert caught.value.problems == [
        "s.yaml: faults[0].colour: not a key of a slack_error fault"
        " (at_minute, kind, retry_after_seconds, status, times)",
        "s.yaml: faults[0].times: 0 is out of range: from 1 to 100",
        "s.yaml: faults[0].status: must be 429, 500 or 503",
        "s.yaml: faults[1].until_minute: 0.5 is out of range: from 1 to 60",
        "s.yaml: faults[1].seconds: -1 is out of range: from 0 to 3600",
        "s.yaml: faults[2].times: 101 is out of range: from 1 to 100",
        "s.yaml: faults[2].operation: 'Nope' is not an operation of the PCS API",
    ]


def test_every_problem_of_one_group_is_said_at_once() -> None:
    """As a fault's: a group's first unknown key and first bad tag hid the others (`mins` and `maxx`, two
    tags of numbers: two runs more to find them)."""
    data = article()
    group = data["groups"][0]
    group["mins"], group["maxx"] = 2, 3
    group["tags"] = {"lifeguard:mode": 1, "owner": 2}
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, Path("s.yaml"))
    assert caught.value.problems == [
        "s.yaml: groups[0].maxx: unknown key (name, min, max, tags, config)",
        "s.yaml: groups[0].mins: unknown key (name, min, max, tags, config)",
        "s.yaml: groups[0].tags.lifeguard:mode: must be a string",
        "s.yaml: groups[0].tags.owner: must be a string",
    ]


def test_every_problem_of_one_change_is_said_at_once() -> None:
    """As a fault's: a change's first bad key hid the others (its config after its minute)."""
    data = article()
    group = data["groups"][0]["name"]
    data["changes"] = [
        {"at_minute": 500, "group": group, "config": "not a mapping", "by": "x"},
        {"at_minute": 5, "group": "grp-nope", "config": [1]},
    ]
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, Path("s.yaml"))
    horizon = data.get("horizon_minutes", 60)
    assert caught.value.problems == [
        "s.yaml: changes[0].by: unknown key (at_minute, group, config)",
        f"s.yaml: changes[0].at_minute: 500 is out of range: from 0 to {horizon}",
        "s.yaml: changes[0].config: must be a mapping of names to values",
        "s.yaml: changes[1].group: 'grp-nope' is not a group of the scenario",
        "s.yaml: changes[1].config: must be a mapping of names to values",
    ]


def test_the_readmes_scenario_path_is_the_shipped_one_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`replay` and `lint` took `events/…` from any directory once installed; `simulate` refused it."""
    monkeypatch.chdir(tmp_path)
    assert load_scenario("events/scenarios/article-loop.yaml").name == "article TERMINATE loop"
    with pytest.raises(ScenarioError, match="no such file, nor a built-in scenario"):
        load_scenario("events/scenarios/nope.yaml")
    # A built-in scenario is taken by its name alone: a path that is not there is no such file, not the
    # built-in one it would reach from the built-ins' directory.
    assert load_scenario("article-loop").name == "article TERMINATE loop"
    for path in ("../scenarios/article-loop", "x/../article-loop", "./article-loop"):
        with pytest.raises(ScenarioError, match="no such file"):
            load_scenario(path)


def test_a_document_that_is_not_a_mapping_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    assert refused([1, 2]) == "s.yaml: (the document): must be a mapping of names to values"
    with pytest.raises(ScenarioError, match=r"nope: no such file, nor a built-in scenario \(article-loop"):
        load_scenario("nope")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"broken.yaml: not valid YAML \(line 2\)"):
        load_scenario(broken)


def test_a_scenario_s_problems_name_its_path_as_given(tmp_path: Path) -> None:
    """`simulate sub/article.yaml` said `article.yaml: …`: which one, of several of that name?"""
    (tmp_path / "sub").mkdir()
    given = tmp_path / "sub" / "article.yaml"
    given.write_text("name: x\ngroups: [{name: g, min: 120}]\n")
    with pytest.raises(ScenarioError) as raised:
        load_scenario(given)
    assert f"{given}: groups[0].name: " in str(raised.value)


def test_a_directory_or_binary_file_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as directory:
        load_scenario(tmp_path)
    assert str(directory.value) == f"{tmp_path}: cannot read it: Is a directory"
    binary = tmp_path / "image.bin"
    binary.write_bytes(b"\xba\xbb\x00")
    with pytest.raises(ScenarioError) as undecodable:
        load_scenario(binary)
    said = f"{binary}: not a scenario: not UTF-8 text (invalid start byte at byte offset 0)"
    assert str(undecodable.value) == said


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (
            "dup.yaml",
            "name: x\nhorizon_minutes: 1\nhorizon_minutes: 1440\n",
            "not valid YAML (line 3): duplicate key",
        ),
        (
            "dup.json",
            '{"name": "x", "horizon_minutes": 1, "horizon_minutes": 1440}',
            "not valid JSON: duplicate key",
        ),
        ("nul.yaml", "name: x\u0000\n", "not valid YAML: special characters are not allowed"),
    ],
)
def test_a_key_given_twice_or_a_character_yaml_refuses_is_one_line(
    tmp_path: Path, name: str, text: str, said: str
) -> None:
    """YAML forbids a key twice, and JSON readers keep the last: a second `horizon_minutes` replaced the first
    without a word."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_merge_key_may_still_override_what_it_brings(tmp_path: Path) -> None:
    path = tmp_path / "merged.yaml"
    data = {key: value for key, value in article().items() if key != "timings"}
    merged = "timings: {<<: {register: 10, relaunch: 100}, relaunch: 120}\n"
    path.write_text(yaml.safe_dump(data) + merged)
    timings = load_scenario(path).timings
    assert (timings.register, timings.relaunch) == (10, 120)


@pytest.mark.parametrize("merge", ["*i", "[*i]"])
def test_a_merge_override_in_an_anchor_merged_higher_up_is_no_duplicate(tmp_path: Path, merge: str) -> None:
    """Building resolves a merge in place, in the anchor too: keys are checked on the nodes as written."""
    path = tmp_path / "nested.yaml"
    path.write_text(f"defaults: &d\n  x: 1\na:\n  inner: &i\n    <<: *d\n    x: 2\nb:\n  <<: {merge}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert "duplicate key" not in str(caught.value)
    assert "unknown key" in str(caught.value)  # read whole, then judged as a scenario


def test_an_int_key_and_a_string_key_of_the_same_text_are_two_keys(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text("1: a\n'1': b\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert "duplicate key" not in str(caught.value)


def test_a_key_holding_a_line_break_is_shown_on_its_line() -> None:
    message = refused({**article(), "evil\nlifeguard simulate: all good": 1})
    assert "evil⏎lifeguard simulate: all good: unknown key" in message


def test_a_scenario_read_from_a_device_is_read_to_its_bound(tmp_path: Path) -> None:
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"yes name >> {fifo}"])
    try:
        with pytest.raises(ScenarioError, match="over 16777216 bytes: not a scenario"):
            load_scenario(fifo)
    finally:
        writer.kill()
        writer.wait()


def test_every_fault_kind_says_what_it_does_and_parses() -> None:
    for kind, (keys, doing) in FAULT_KINDS.items():
        assert doing, kind
        data = article()
        data["faults"] = [{"kind": kind, "at_minute": 1}]
        [fault] = parse_scenario(data).faults
        assert (fault.kind, fault.at_minute, fault.times) == (kind, 1.0, 1)
        assert keys <= {
            "until_minute",
            "group",
            "times",
            "operation",
            "status",
            "retry_after_seconds",
            "seconds",
        }


def test_tags_are_bounded_as_pcs_bounds_them() -> None:
    data = article()
    data["groups"][0]["tags"] = {f"k{i}": "v" for i in range(51)}
    assert refused(data) == "s.yaml: groups[0].tags: 51 tags; at most 50, as PCS allows"
    data["groups"][0]["tags"] = {"k" * 129: "v"}
    assert refused(data).startswith("s.yaml: groups[0].tags: 129 characters; at most 128")


def test_hostile_values_are_one_line_errors_not_tracebacks(tmp_path: Path) -> None:
    data = article()
    data["horizon_minutes"] = 10**400
    assert refused(data).startswith("s.yaml: horizon_minutes: 100000000000… is out of range")
    data = article()
    data["scripts"]["fail.sh"] = "\ud800"
    assert refused(data) == "s.yaml: scripts.fail.sh: not text that UTF-8 can hold (a lone surrogate?)"
    data = article()
    data["groups"][0]["min"] = data["groups"][0]["max"] = 100
    data["groups"].append({**data["groups"][0], "name": "second"})
    data["groups"].append({**data["groups"][0], "name": "third"})
    assert refused(data) == "s.yaml: groups: 300 static nodes in all; at most 200"
    data = article()
    data["timings"] = {"capacity_retry": 0}  # a launch that fails would be tried again at the same instant
    assert refused(data).startswith("s.yaml: timings.capacity_retry: 0 is out of range: from 1")
    data = article()
    data["faults"] = [{"kind": "pcs_error", "at_minute": 1, "operation": "UpdateComputeNodeGroups"}]
    assert refused(data) == (
        "s.yaml: faults[0].operation: 'UpdateComputeNodeGroups' is not an operation of the PCS API"
    )
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScenarioError, match=r"deep\.json: nested too deep to be a scenario"):
        load_scenario(deep)
    # YAML (not JSON) makes Python ints of what it reads: one past 4,300 digits, or a date past its
    # calendar, raises ValueError from the YAML reader itself.
    for name, text in (("long.yaml", "horizon_minutes: " + "9" * 5000), ("date.yaml", "name: 2026-13-45")):
        (tmp_path / name).write_text(text + "\n")
        with pytest.raises(ScenarioError, match=rf"^{re.escape(str(tmp_path / name))}: not valid YAML: "):
            load_scenario(tmp_path / name)
    # Its hexadecimal form of any length is read (bases of two have no limit), and is out of range.
    (tmp_path / "hex.yaml").write_text("name: x\nhorizon_minutes: 0x" + "f" * 5000 + "\n")
    with pytest.raises(ScenarioError, match=r"horizon_minutes: a number of 20,000 bits… is out of range"):
        load_scenario(tmp_path / "hex.yaml")


def test_every_problem_of_a_scenario_is_reported_at_once() -> None:
    data = article()
    data["horizon_minutes"] = 0
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"][0]["onError"] = "EXPLODE"
    data["groups"][0]["config"]["stages"]["nodeBootstrapped"][1]["name"] = "bad/name"
    data["faults"] = [{"kind": "meteor", "at_minute": 1}, {"kind": "pcs_error", "at_minute": -1}]
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, Path("s.yaml"))
    problems = caught.value.problems
    assert [p.split(": ")[1] for p in problems] == [
        "horizon_minutes",
        "groups[0].config.stages.nodeBootstrapped[0].onError",
        "groups[0].config.stages.nodeBootstrapped[1].name",
        "faults[0].kind",
        "faults[1].at_minute",
    ]
    assert str(caught.value).startswith("5 problems: s.yaml: horizon_minutes: 0 is out of range")


def test_the_twins_scontrol_answers_in_one_write_so_a_ready_check_under_pipefail_never_fails(
    tmp_path: Path,
) -> None:
    """The article's ready-check pipes `scontrol show node` into `grep -q` under `set -o pipefail`: grep
    leaves at its match, and an answer written in two parts then dies of SIGPIPE and fails the check
    (about one boot in sixteen here, more on a loaded machine). Slurm's answer is one write; so is the
    twin's."""
    from lifeguard_cli.simulate.twin import _SCONTROL

    scontrol = tmp_path / "scontrol"
    scontrol.write_text(_SCONTROL)
    scontrol.chmod(0o755)
    check = (
        f"set -o pipefail; for _ in $(seq 200); do "
        f"{scontrol} show node n1 | grep -q '^NodeName=n1 ' || exit 1; done"
    )
    root = tmp_path / "root"  # a node in nodeReady: slurmd runs
    (root / "var/log/amazon/pcs/lifecycle/actions/nodeReady").mkdir(parents=True)
    env = {
        "PATH": os.environ["PATH"],
        "PCS_NODE_ID": "n1",
        "LIFEGUARD_SIM_SLURM_LOG": os.devnull,
        "LIFEGUARD_NODE_ROOT": str(root),
    }
    done = subprocess.run(["bash", "-c", check], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_twins_scontrol_does_nothing_before_slurmd_runs(tmp_path: Path) -> None:
    """In nodeBootstrapped slurmd is not running (the article): a drain asked there fails and is no drain."""
    from lifeguard_cli.simulate.twin import _SCONTROL

    scontrol = tmp_path / "scontrol"
    scontrol.write_text(_SCONTROL)
    scontrol.chmod(0o755)
    slurm_log = tmp_path / "slurm.log"
    root = tmp_path / "root"
    (root / "var/log/amazon/pcs/lifecycle/actions/nodeBootstrapped").mkdir(parents=True)
    env = {
        "PATH": os.environ["PATH"],
        "LIFEGUARD_SIM_SLURM_LOG": str(slurm_log),
        "LIFEGUARD_NODE_ROOT": str(root),
    }
    drain = [str(scontrol), "update", "nodename=n1", "State=DRAIN", "Reason=x"]
    done = subprocess.run(drain, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "slurmd is not running yet" in done.stderr
    assert not slurm_log.exists()
    (root / "var/log/amazon/pcs/lifecycle/actions/nodeReady").mkdir()
    assert subprocess.run(drain, env=env, check=False).returncode == 0
    assert "State=DRAIN" in slurm_log.read_text()


def _problems_at(data: dict[str, Any]) -> list[str]:
    """Where each problem of the scenario `data` is, in the order said."""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, Path("s.yaml"))
    return [problem.split(": ")[1] for problem in caught.value.problems]


def test_every_problem_of_the_stack_and_the_timings_is_reported_at_once() -> None:
    """The first problem of each part hid the rest of it."""
    data = article()
    data["stack"] = {"Threshold": 0, "Bogus": 1, "WindowMinutes": -1, "CooldownMinutes": 2.5, "DryRun": True}
    data["timings"] = {"register": -1, "boot": 5, "delivery": "soon"}
    assert _problems_at(data) == [
        "timings.boot",
        "timings.register",
        "timings.delivery",
        "stack.Bogus",
        "stack.Threshold",
        "stack.WindowMinutes",
        "stack.CooldownMinutes",  # whole minutes, as template.yaml takes them
    ]
    data["stack"] = {"Threshold": 3, "CooldownMinutes": 0, "DryRun": True}
    data["timings"] = {"register": 30}
    scenario = parse_scenario(data, Path("s.yaml"))
    assert scenario.stack == StackSettings(threshold=3, cooldown_minutes=0, dry_run=True)
    assert scenario.timings.register == 30


def test_every_problem_of_one_group_is_reported_at_once() -> None:
    """A bad name hid the same group's min and its configuration's problems."""
    data = article()
    group = data["groups"][0]
    group.update(name="g", min=120, tags=[], extra=1)
    group["config"]["stages"]["nodeBootstrapped"][0]["onError"] = "NOPE"
    assert _problems_at(data) == [
        "groups[0].extra",
        "groups[0].name",
        "groups[0].min",
        "groups[0].tags",
        "groups[0].config.stages.nodeBootstrapped[0].onError",
    ]


def test_a_group_of_no_static_nodes_needs_no_max() -> None:
    """`min: 0` alone: max defaults to max(min, 1), PCS's least maxInstanceCount, not to a refused 0."""
    data = article()
    data["groups"][0]["min"] = 0
    data["groups"][0].pop("max", None)
    [group] = parse_scenario(data, Path("s.yaml")).groups
    assert (group.min, group.max) == (0, 1)
    data["groups"][0].update(min=3)
    [group] = parse_scenario(data, Path("s.yaml")).groups
    assert (group.min, group.max) == (3, 3)
