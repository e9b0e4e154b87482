from __future__ import annotations

import copy
from typing import Any

from lifeguard.lifecycle import NodeLifecycleActions
from lifeguard.risks import RISK_CODES, find_risks
from tests.conftest import load_event

PINNED = {"checksum": "0" * 64}


def config(*scripts: tuple[str, dict[str, Any]], caching: str | None = None) -> NodeLifecycleActions:
    stages: dict[str, list[dict[str, Any]]] = {}
    for stage, script in scripts:
        stages.setdefault(stage, []).append(script)
    data: dict[str, Any] = {"stages": stages}
    if caching:
        data["scriptCachingPolicy"] = caching
    return NodeLifecycleActions.from_api(data)


def script(name: str, location: str = "s3://bkt/x.sh", **fields: Any) -> dict[str, Any]:
    source = {"scriptLocation": location, **fields.pop("source", PINNED)}
    return {"name": name, "scriptSource": source, **fields}


def codes(
    actions: NodeLifecycleActions, previous: NodeLifecycleActions | None = None
) -> list[tuple[str, str]]:
    return [(risk.code, risk.path) for risk in find_risks(actions, previous)]


def test_optional_looking_script_on_default_terminate_is_flagged() -> None:
    actions = config(("nodeBootstrapped", script("verify-motd")), ("nodeBootstrapped", script("mount-fsx")))
    assert codes(actions) == [
        ("optional-script-terminates", "stages.nodeBootstrapped[0].onError"),
        ("first-boot-only-undone-by-reboot", "stages.nodeBootstrapped[1].executionPolicy"),
    ]


def test_an_explicit_terminate_is_a_decision_not_a_risk() -> None:
    assert codes(config(("nodeBootstrapped", script("verify-gpus", onError="TERMINATE")))) == []


def test_unpinned_sources_are_flagged_and_pinned_ones_not() -> None:
    actions = config(
        ("nodeBootstrapped", script("a", source={}, onError="CONTINUE")),
        ("nodeBootstrapped", script("b", "https://example.com/b.sh", source={}, onError="CONTINUE")),
        ("nodeBootstrapped", script("c", source={"s3VersionId": "v1"}, onError="CONTINUE")),
        ("nodeBootstrapped", script("d", onError="CONTINUE")),
    )
    risks = find_risks(actions)
    assert [(r.code, r.path) for r in risks] == [
        ("unpinned-mutable-source", "stages.nodeBootstrapped[0].scriptSource"),
        ("unpinned-mutable-source", "stages.nodeBootstrapped[1].scriptSource"),
    ]
    assert "s3VersionId" in risks[0].message
    assert "s3VersionId" not in risks[1].message


def test_a_script_moved_with_the_old_object_s_version_fetches_nothing() -> None:
    """A copy of the old entry with its location edited: S3 gives a copy a version of its own, so the old
    version is at no new location and every node fails the fetch. A new version with the move, a move
    without a version, or the same version at the same location is no such risk."""
    path = "stages.nodeBootstrapped[0].scriptSource.s3VersionId"

    def at(location: str, **source: Any) -> NodeLifecycleActions:
        entry = script(
            "mount-fsx", location, source=source, onError="TERMINATE", executionPolicy="EVERY_BOOT"
        )
        return config(("nodeBootstrapped", entry))

    old = at("s3://bkt/mount-v1.sh", s3VersionId="3HL4kqtJlcpXroDTDmJ")
    [risk] = find_risks(at("s3://bkt/mount-v2.sh", s3VersionId="3HL4kqtJlcpXroDTDmJ"), old)
    assert (risk.code, risk.path) == ("version-of-another-object", path)
    assert "s3://bkt/mount-v1.sh to s3://bkt/mount-v2.sh" in risk.message
    assert codes(at("s3://other/mount-v1.sh", s3VersionId="3HL4kqtJlcpXroDTDmJ"), old) == [
        ("version-of-another-object", path)
    ]
    assert codes(at("s3://bkt/mount-v2.sh", s3VersionId="Zm9vYmFyYmF6"), old) == []
    assert codes(at("s3://bkt/mount-v1.sh", s3VersionId="3HL4kqtJlcpXroDTDmJ"), old) == []
    assert codes(at("s3://bkt/mount-v2.sh", checksum="0" * 64), old) == []
    null = at("s3://bkt/mount-v1.sh", s3VersionId="null", checksum="0" * 64)
    assert codes(at("s3://bkt/mount-v2.sh", s3VersionId="null", checksum="0" * 64), null) == []
    # An empty s3VersionId (PCS takes it) is no version either: no other object's to keep.
    empty = at("s3://bkt/mount-v1.sh", s3VersionId="", checksum="0" * 64)
    assert codes(at("s3://bkt/mount-v2.sh", s3VersionId="", checksum="0" * 64), empty) == []
    assert codes(at("s3://bkt/mount-v2.sh", s3VersionId="3HL4kqtJlcpXroDTDmJ")) == []  # no previous


def test_every_boot_under_cache_once_from_a_mutable_location() -> None:
    every_boot = script("tune", source={}, executionPolicy="EVERY_BOOT", onError="CONTINUE")
    assert ("stale-cache-every-boot", "stages.nodeBootstrapped[0].executionPolicy") in codes(
        config(("nodeBootstrapped", every_boot))
    )
    refreshed = config(("nodeBootstrapped", every_boot), caching="REFRESH_ON_REBOOT")
    assert "stale-cache-every-boot" not in [code for code, _ in codes(refreshed)]


def test_every_boot_script_updated_in_place_against_the_previous_config() -> None:
    before = config(("nodeBootstrapped", script("tune", executionPolicy="EVERY_BOOT", onError="CONTINUE")))
    after_script = script(
        "tune", executionPolicy="EVERY_BOOT", onError="CONTINUE", source={"checksum": "1" * 64}
    )
    after = config(("nodeBootstrapped", after_script))
    assert codes(after, before) == [("updated-in-place", "stages.nodeBootstrapped[0].scriptSource")]
    assert codes(after, after) == []
    moved = config(
        (
            "nodeBootstrapped",
            {
                **copy.deepcopy(after_script),
                "scriptSource": {"scriptLocation": "s3://bkt/v2/x.sh", "checksum": "1" * 64},
            },
        )
    )
    assert codes(moved, before) == []


def test_an_update_in_place_is_new_content_pinned_at_the_same_location_fetched_by_no_version() -> None:
    """Only a checksum changed at the same location, fetched there by no S3 version, says the object was
    replaced in place: nodes booting between the upload and the update failed its checksum, whatever the
    script's policies. Pinning an unpinned script, as `unpinned-mutable-source` advises, replaces nothing;
    nodes that booted before the update run no old copy: PCS drains and replaces them (the article)."""
    path = "stages.nodeBootstrapped[0].scriptSource"

    def at(source: dict[str, Any], location: str = "s3://bkt/x.sh", **fields: Any) -> NodeLifecycleActions:
        return config(("nodeBootstrapped", script("tune", location, source=source, **fields)))

    old, new = {"checksum": "0" * 64}, {"checksum": "1" * 64}
    every_boot = {"executionPolicy": "EVERY_BOOT", "onError": "CONTINUE"}
    policies = ({}, {"executionPolicy": "FIRST_BOOT_ONLY"}, every_boot)
    for fields in policies:
        assert ("updated-in-place", path) in codes(at(new, **fields), at(old, **fields)), fields
    assert ("updated-in-place", path) not in codes(at(new), at({}))  # pinned as lint advises
    versioned = {"s3VersionId": "v1", "checksum": "0" * 64}  # nodes fetched v1 until the update
    assert ("updated-in-place", path) not in codes(at({"s3VersionId": "v2", **new}), at(versioned))
    # Version null names the object as no version does: it was replaced in place all the same.
    [null] = [
        r for r in find_risks(at(new), at({"s3VersionId": "null", **old})) if r.code == "updated-in-place"
    ]
    assert "replaced in place" in null.message
    # A version's content never changes: a new checksum for it means one of the two is wrong.
    [same] = [
        r for r in find_risks(at({"s3VersionId": "v1", **new}), at(versioned)) if r.code == "updated-in-place"
    ]
    assert "one of the two checksums is wrong" in same.message
    [pinned] = [
        r for r in find_risks(at({"s3VersionId": "v2", **new}), at(old)) if r.code == "updated-in-place"
    ]
    assert "s3VersionId" not in pinned.message  # it pins one already: no advice to
    https = "https://example.com/x.sh"
    [risk] = [r for r in find_risks(at(new, https), at(old, https)) if r.code == "updated-in-place"]
    assert "failed the script" in risk.message
    assert "s3VersionId" not in risk.message


def test_the_same_digest_in_another_case_is_not_an_update_in_place() -> None:
    # PCS takes a checksum in either case ([a-fA-F0-9]{64}): re-cased, it pins the same bytes.
    policy = {"executionPolicy": "EVERY_BOOT", "onError": "CONTINUE"}
    before = config(("nodeBootstrapped", script("tune", source={"checksum": "ab" * 32}, **policy)))
    after = config(("nodeBootstrapped", script("tune", source={"checksum": "AB" * 32}, **policy)))
    assert codes(after, before) == []


def test_words_are_matched_whole_with_their_endings_not_as_prefixes() -> None:
    # `log` and `check` say optional; `logical`, `login` and `checkpoint` do not: telling the owner of
    # `setup-logical-volumes` to let it fail would let nodes come up without their volumes.
    for name in ("setup-logical-volumes", "restore-checkpoint-dir", "login-node-setup", "testbed-tune"):
        assert codes(config(("nodeBootstrapped", script(name)))) == [], name
    for name in ("checks", "verification", "logging", "validate_env", "report-inventory", "warmup"):
        assert codes(config(("nodeBootstrapped", script(name)))) == [
            ("optional-script-terminates", "stages.nodeBootstrapped[0].onError")
        ], name
    ready = [("nodeReady", script(name, onError="CONTINUE")) for name in ("configuration", "pipeline")]
    assert codes(config(*ready)) == [("node-ready-races-jobs", "stages.nodeReady[0]")]


def test_names_in_camel_or_pascal_case_are_read_word_by_word() -> None:
    # PCS takes `VerifyMounts` as it takes `verify-mounts`: how a name is written decides no warning.
    for name in ("VerifyClock", "runLicenseChecks", "MOTDValidation", "ReportInventory"):
        assert codes(config(("nodeBootstrapped", script(name)))) == [
            ("optional-script-terminates", "stages.nodeBootstrapped[0].onError")
        ], name
    # A check of the node's health or GPUs, read word by word, is what TERMINATE is for.
    for name in ("LoginNodeSetup", "RestoreCheckpointDir", "TestbedTune", "runHealthChecks", "GPUValidation"):
        assert codes(config(("nodeBootstrapped", script(name)))) == [], name
    ready = [("nodeReady", script(name, onError="CONTINUE")) for name in ("InstallCuda", "FSx", "hello")]
    assert codes(config(*ready)) == [
        ("node-ready-races-jobs", "stages.nodeReady[0]"),
        ("node-ready-races-jobs", "stages.nodeReady[1]"),
    ]


def test_a_check_of_what_the_node_cannot_work_without_is_left_on_terminate() -> None:
    """The article: TERMINATE "is suited for configurations where failure renders the node unusable, such
    as shared storage mounts": a check of a mount, storage or a driver is not told to let nodes come up
    without them. Anything else optional is told, setting something up or not."""
    terminates = [("optional-script-terminates", "stages.nodeBootstrapped[0].onError")]
    guards = (
        "verify-mounts",
        "check-fsx-mount",
        "validate-lustre",
        "VerifyMounts",
        "check_nvidia_driver",
        "check-shared-storage",
        "verify-scratch",
        "check-beegfs",
        "verify-efa",
    )
    for name in guards:
        assert codes(config(("nodeBootstrapped", script(name)))) == [], name
    optional = (
        "setup-motd",
        "install-monitoring-agent",
        "sync-logs",
        "configure-logging",
        "report-mount-status",
    )
    for name in optional:
        assert codes(config(("nodeBootstrapped", script(name)))) == terminates, name


def test_a_check_of_the_nodes_accelerators_or_health_is_not_told_to_let_it_fail() -> None:
    """`gpu-check` on the default TERMINATE was told to set CONTINUE: a GPU node whose GPUs fail their check
    would then serve jobs that fail on it. A check of the accelerators or of the node's health is what
    TERMINATE is for (the article: a failure that renders the node unusable); a report or metric of them is
    still optional."""
    for name in (
        "gpu-check",
        "verify-gpus",
        "check-nvidia-driver",
        "cuda-test",
        "neuron-check",
        "health-check",
    ):
        assert codes(config(("nodeBootstrapped", script(name)))) == [], name
    # A report, log or notice of such a check leaves the node as it found it (a review of the first
    # version: these were silenced with the checks they report on).
    reports = (
        "report-gpu-check",
        "gpu-check-report",
        "log-gpu-test",
        "notify-health-check",
        "report-mount-check",
    )
    for name in ("gpu-metrics", "report-gpu-health", "log-nccl-version", *reports):
        assert codes(config(("nodeBootstrapped", script(name)))) == [
            ("optional-script-terminates", "stages.nodeBootstrapped[0].onError")
        ], name


def test_setting_up_what_the_node_cannot_work_without_is_not_told_to_let_it_fail() -> None:
    """`mount-efs-logs` mounts shared storage (for logs): told it looked optional, its owner would set
    CONTINUE and nodes would come up without the mount. A report of a mount is still optional, and a
    mount of any kind left to FIRST_BOOT_ONLY is still undone by a reboot."""
    every_boot = {"executionPolicy": "EVERY_BOOT"}
    for name in ("mount-efs-logs", "install-efa-driver-debug", "setup-scratch-telemetry"):
        assert codes(config(("nodeBootstrapped", script(name, **every_boot)))) == [], name
    # What begins with no setup word is not setup: a report, a log, a debug, a metric of it still is told.
    watching = ("report-mount-status", "log-mounts", "record-mounts", "notify-mount-failure", "debug-efa")
    for name in (*watching, "efa-diagnostics", "gpu-driver-diag", "collect-efa-logs", "fsx-metrics"):
        assert codes(config(("nodeBootstrapped", script(name, **every_boot)))) == [
            ("optional-script-terminates", "stages.nodeBootstrapped[0].onError")
        ], name
    assert codes(config(("nodeBootstrapped", script("log-mounts")))) == [
        ("optional-script-terminates", "stages.nodeBootstrapped[0].onError")
    ]  # and, as it sets nothing up, no reboot undoes it
    assert codes(config(("nodeBootstrapped", script("efs", "s3://bkt/MountEfsLogs.sh", **every_boot)))) == []
    # A number that orders the scripts is not their first word.
    for name in ("01-mount-efs-logs", "10_mount_fsx_logs", "2-install-efa-driver-debug"):
        assert codes(config(("nodeBootstrapped", script(name, **every_boot)))) == [], name
    assert codes(config(("nodeBootstrapped", script("mount-efs-logs")))) == [
        ("first-boot-only-undone-by-reboot", "stages.nodeBootstrapped[0].executionPolicy")
    ]
    # In nodeReady, it is told what TERMINATE does there instead (once, as for any script on it).
    assert codes(config(("nodeReady", script("mount-efs-logs", **every_boot)))) == [
        ("node-ready-races-jobs", "stages.nodeReady[0]"),
        ("node-ready-terminates-active-node", "stages.nodeReady[0].onError"),
    ]


def test_an_https_urls_query_and_fragment_say_nothing_of_the_script() -> None:
    """Words are taken from the file a location names: `?ref=debug` on a URL is no debug script. An S3 key
    may hold `?` and `#`: its last segment is read whole."""
    every_boot = {"executionPolicy": "EVERY_BOOT"}
    for location in ("https://example.com/s/mount-fsx.sh?ref=debug", "https://example.com/s/tune.sh#logs"):
        name = "setup" if "tune" in location else "fsx"
        assert codes(config(("nodeBootstrapped", script(name, location, **every_boot)))) == [], location
    # A name that says nothing either way: the query alone would make it a debug script.
    tune = script("tune", "https://example.com/s/tune.sh?ref=debug", **every_boot)
    assert codes(config(("nodeBootstrapped", tune))) == []
    assert codes(config(("nodeBootstrapped", script("tune", "s3://bkt/tune?debug.sh", **every_boot)))) == [
        ("optional-script-terminates", "stages.nodeBootstrapped[0].onError")
    ]
    assert codes(
        config(("nodeBootstrapped", script("tune", "https://example.com/p/debug.sh?v=1", **every_boot)))
    ) == [("optional-script-terminates", "stages.nodeBootstrapped[0].onError")]


def test_a_new_s3_version_kept_under_the_old_checksum_is_flagged() -> None:
    """A new version uploaded and its s3VersionId given, its checksum not: every node fails the checksum
    unless the two versions hold the same bytes. A first version given to content already pinned, or the
    same version, is no such risk."""

    def at(version: str | None, checksum: str = "a" * 64) -> NodeLifecycleActions:
        source = {"checksum": checksum, **({"s3VersionId": version} if version is not None else {})}
        entry = script(
            "tune", "s3://bkt/tune.sh", source=source, onError="CONTINUE", executionPolicy="EVERY_BOOT"
        )
        return config(("nodeBootstrapped", entry))

    [risk] = find_risks(at("v2"), at("v1"))
    assert (risk.code, risk.path) == ("updated-in-place", "stages.nodeBootstrapped[0].scriptSource.checksum")
    assert "from s3VersionId v1 to v2 with the same checksum" in risk.message
    assert codes(at("v2", "b" * 64), at("v1")) == []  # its own checksum given
    assert codes(at("v1"), at(None)) == []
    assert codes(at("v1"), at("v1")) == []


def test_setup_a_reboot_undoes_left_on_the_first_boot_only_is_flagged() -> None:
    """The article: a script that omits executionPolicy runs on the first boot only (only the EVERY_BOOT
    script ran again after `scontrol reboot`), "so scripts that need to run on every reboot must explicitly
    specify EVERY_BOOT", where ParallelCluster ran them on every boot. A mount is gone after a reboot."""
    for name in (
        "mount-fsx",
        "MountLustre",
        "tune-sysctl",
        "make-tmpfs",
        "hugepages",
        "setup-swapfile",
        "remount-nfs",
    ):
        assert codes(config(("nodeBootstrapped", script(name, onError="TERMINATE")))) == [
            ("first-boot-only-undone-by-reboot", "stages.nodeBootstrapped[0].executionPolicy")
        ], name
    ready = find_risks(config(("nodeReady", script("mount-fsx", onError="CONTINUE"))))
    [message] = [risk.message for risk in ready if risk.code == "first-boot-only-undone-by-reboot"]
    assert "set EVERY_BOOT" in message
    decided = [
        script(f"mount-{policy.lower()}", onError="TERMINATE", executionPolicy=policy)
        for policy in ("EVERY_BOOT", "FIRST_BOOT_ONLY")
    ]
    # A check or a report of a mount sets nothing up; setup a reboot keeps (packages) needs no second run.
    # Nor do names that say their work lasts: an install (`install-lustre-client`), fstab, grub.
    names = (
        "verify-mounts",
        "report-mount-status",
        "install-cuda",
        "install-lustre-client",
        "install-efs-utils",
        "persist-fstab-mounts",
        "setup-hugepages-grub",
    )
    others = [script(name, onError="CONTINUE") for name in names]
    assert codes(config(*(("nodeBootstrapped", entry) for entry in (*decided, *others)))) == []


def test_setup_work_in_node_ready_races_jobs() -> None:
    actions = config(
        ("nodeReady", script("install-cuda", onError="CONTINUE")),
        ("nodeReady", script("hello", onError="CONTINUE")),
    )
    assert codes(actions) == [("node-ready-races-jobs", "stages.nodeReady[0]")]


def test_a_check_or_report_of_setup_in_node_ready_races_no_job() -> None:
    """The article's ready-check pattern: a check of a mount or a package in nodeReady sets nothing up.
    It was told "looks like node setup, move it to nodeBootstrapped"."""
    for name in ("verify-mounts", "check-fsx", "validate-nfs", "monitor-efs", "check-pip-packages"):
        assert codes(config(("nodeReady", script(name, onError="CONTINUE")))) == [], name
    # Setup of another optional-looking kind (a log agent, a prefetch, a warm cache) still races jobs.
    for name in ("install-fsx-client", "prefetch-dataset", "install-cloudwatch-logs-agent", "warm-fsx-cache"):
        assert codes(config(("nodeReady", script(name, onError="CONTINUE")))) == [
            ("node-ready-races-jobs", "stages.nodeReady[0]")
        ], name


def test_stop_sequence_is_flagged_as_hiding_failures() -> None:
    """The article: a STOP_SEQUENCE failure showed nowhere but the node's own files (no scaling-log record,
    the node ACTIVE), and PCS documents it for debugging; left in a configuration, a failing script goes
    unseen on every node. CONTINUE and TERMINATE are decisions, not risks."""
    actions = config(
        ("nodeBootstrapped", script("mount-fsx", onError="STOP_SEQUENCE", executionPolicy="EVERY_BOOT")),
        ("nodeBootstrapped", script("hello", onError="CONTINUE")),
        ("nodeReady", script("hello-ready", onError="TERMINATE")),
    )
    assert codes(actions) == [("stop-sequence-hides-failures", "stages.nodeBootstrapped[0].onError")]
    stop_sequence = NodeLifecycleActions.from_api(load_event("configs/article-stop-sequence.json"))
    assert "stop-sequence-hides-failures" in {risk.code for risk in find_risks(stop_sequence)}


def test_article_configs_raise_only_known_codes() -> None:
    for name in ("first-boot-every-boot", "stop-sequence", "terminate", "reverted"):
        actions = NodeLifecycleActions.from_api(load_event(f"configs/article-{name}.json"))
        assert {risk.code for risk in find_risks(actions)} <= set(RISK_CODES)


def test_s3_version_null_and_no_version_are_the_same_unpinned_source_not_an_update_in_place() -> None:
    """s3VersionId null is no pin: null and no version name the same object, so adding or removing it at
    the same location changes no script in place (and either is unpinned)."""

    def config(version: str | None) -> NodeLifecycleActions:
        source = {"scriptLocation": "s3://bucket/scripts/mount.sh"}
        if version is not None:
            source["s3VersionId"] = version
        script = {
            "name": "mount",
            "scriptSource": source,
            "executionPolicy": "EVERY_BOOT",
            "onError": "TERMINATE",
        }
        return NodeLifecycleActions.from_api({"stages": {"nodeBootstrapped": [script]}})

    for before, after in (("null", None), (None, "null")):
        codes = [r.code for r in find_risks(config(after), config(before))]
        assert "updated-in-place" not in codes
        assert "unpinned-mutable-source" in codes


def test_a_scripts_file_name_says_what_it_does_as_much_as_its_name() -> None:
    """Generic names (step-1, step-2): the file a script runs tells the review it is telemetry under PCS's
    TERMINATE, or a long install in nodeReady."""
    config = NodeLifecycleActions.from_api(
        {
            "stages": {
                "nodeBootstrapped": [
                    {
                        "name": "step-1",
                        "scriptSource": {"scriptLocation": "s3://lca-scripts-example/send-metrics.sh"},
                    }
                ],
                "nodeReady": [
                    {
                        "name": "step-2",
                        "onError": "CONTINUE",
                        "scriptSource": {"scriptLocation": "s3://lca-scripts-example/install-cuda.sh"},
                    }
                ],
            }
        }
    )
    found = {(risk.code, risk.path) for risk in find_risks(config)}
    assert ("optional-script-terminates", "stages.nodeBootstrapped[0].onError") in found
    assert ("node-ready-races-jobs", "stages.nodeReady[0]") in found


def test_a_node_ready_script_left_on_terminate_is_told_it_ends_an_active_node() -> None:
    """PCS logs the node ACTIVE before nodeReady runs (the article), and Slurm may give it jobs: a failure
    under the default TERMINATE ends a node running them. The article's ready-check runs under CONTINUE.
    An explicit onError is a choice, an optional-looking script is told once (by its own risk), and a
    check of what the node cannot work without is what TERMINATE is for."""
    assert codes(config(("nodeReady", script("tune-slurm-features")))) == [
        ("node-ready-terminates-active-node", "stages.nodeReady[0].onError")
    ]
    for on_error in ("CONTINUE", "TERMINATE", "STOP_SEQUENCE"):
        found = codes(config(("nodeReady", script("tune-slurm-features", onError=on_error))))
        assert ("node-ready-terminates-active-node", "stages.nodeReady[0].onError") not in found, on_error
    assert codes(config(("nodeReady", script("ready-check")))) == [
        ("optional-script-terminates", "stages.nodeReady[0].onError")
    ]
    assert codes(config(("nodeReady", script("verify-mounts")))) == []
    assert codes(config(("nodeBootstrapped", script("tune-slurm-features")))) == []


def test_an_acronyms_plural_in_pascal_case_is_one_word() -> None:
    """`VerifyGPUs` was read as `verify gp us`: not a check of the GPUs, it was told to set CONTINUE, which
    lets a node whose GPUs fail their check serve jobs. An acronym's plural is one word, as `verify-gpus`."""
    for name in ("VerifyGPUs", "CheckGPUs", "CheckEFAs", "verifyGPUsReady"):
        assert codes(config(("nodeBootstrapped", script(name)))) == [], name
    # An acronym before a word of two letters ending in s is the acronym and the word, as before.
    for name in ("VerifyEFAIsUp", "VerifyNVIDIAIsLoaded", "CheckEFAAsExpected"):
        assert codes(config(("nodeBootstrapped", script(name)))) == [], name
    # A word after the acronym still starts where its capital does.
    assert codes(config(("nodeBootstrapped", script("GPUsReport")))) == [
        ("optional-script-terminates", "stages.nodeBootstrapped[0].onError")
    ]
