"""Lifeguard's `NodeLifecycleActions` lint as cfn-lint rules, for `cfn-lint --append-rules`.

    cfn-lint template.yaml --append-rules lifeguard_cli.cfn_rules        # installed package
    cfn-lint template.yaml --append-rules src/lifeguard_cli/cfn_rules    # from a clone

(`--append-rules` takes every argument after it as a rules location: the template goes first.) E9101 is a
validation problem, W9101-W9109 one risk code each, I9101 a value that is an intrinsic function (shown with
`--include-checks I`). cfn-lint must run in the Python environment Lifeguard is installed in.
"""

from lifeguard_cli.cfn_rules.lifecycle_actions import (
    RISK_RULES,
    FirstBootOnlyUndoneByReboot,
    IntrinsicNotChecked,
    InvalidNodeLifecycleActions,
    NodeReadyRacesJobs,
    OptionalScriptTerminates,
    StaleCacheEveryBoot,
    StopSequenceHidesFailures,
    UnpinnedMutableSource,
    UpdatedInPlace,
    VersionOfAnotherObject,
)

__all__ = [
    "RISK_RULES",
    "FirstBootOnlyUndoneByReboot",
    "IntrinsicNotChecked",
    "InvalidNodeLifecycleActions",
    "NodeReadyRacesJobs",
    "OptionalScriptTerminates",
    "StaleCacheEveryBoot",
    "StopSequenceHidesFailures",
    "UnpinnedMutableSource",
    "UpdatedInPlace",
    "VersionOfAnotherObject",
]
