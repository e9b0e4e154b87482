#!/bin/bash
# The article's record-boot.sh. Only change: the record file can be moved with LCA_BOOT_RECORD, so a test
# can run it under a temporary root instead of writing /var/lib.
set -euo pipefail
LABEL="${1:-unknown}"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) label=${LABEL} first_boot=${PCS_IS_FIRST_BOOT:-unset} node=${PCS_NODE_ID:-unset} cng=${PCS_COMPUTE_NODE_GROUP_NAME:-unset}" >> "${LCA_BOOT_RECORD:-/var/lib/lca-boot-record.log}"
echo "recorded ${LABEL}"
