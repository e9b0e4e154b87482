#!/bin/bash
# PCS lifecycle script: install Lifeguard's node bundle and run its report shipper as a systemd service,
# so every later script's outcome leaves the node even when a TERMINATE failure takes the node away.
#
# It runs FIRST in nodeBootstrapped, with executionPolicy EVERY_BOOT and onError CONTINUE. The stack
# publishes this script and the bundle to its versioned bucket; the entry to add, pinned to both versions
# and checksums, is its output ShipperLifecycleEntry, and `lifeguard enroll GROUP --cluster CLUSTER` adds
# it to a compute node group:
#   {"name": "lifeguard-shipper",
#    "scriptSource": {"scriptLocation": "s3://BUCKET/lifeguard/install-shipper.sh",
#                     "s3VersionId": "<installer version>", "checksum": "<installer sha256>"},
#    "arguments": ["s3://BUCKET/lifeguard/lifeguard-node.pyz", "<bundle sha256>", "<log group>",
#                  "<bundle version>"],
#    "executionPolicy": "EVERY_BOOT", "onError": "CONTINUE"}
# With BUNDLE_VERSION_ID, exactly that version of an s3:// bundle is fetched, so a redeploy that publishes
# a new bundle at the same key leaves every enrolled group on the one it pinned. The instance role needs
# the stack's managed policy NodePolicyArn (s3:GetObject and s3:GetObjectVersion on the bundle and this
# script; logs:CreateLogStream, logs:PutLogEvents, logs:GetLogEvents on the log group).
set -euo pipefail
# Root's files are root's alone to change, whatever umask the agent runs scripts with, and Python imports
# nothing from the directory it was started in (`-c` and `-` put it first on the path): a user who can write
# there would otherwise have root run their boto3.py.
umask 022
cd /

usage="usage: install-shipper.sh BUNDLE_LOCATION BUNDLE_SHA256 LOG_GROUP [BUNDLE_VERSION_ID]"
bundle_location=${1:?$usage}
bundle_sha256=${2:?$usage}
log_group=${3:?$usage}
bundle_version=${4:-}
root=${LIFEGUARD_INSTALL_ROOT:-}
python=${LIFEGUARD_PYTHON:-/usr/bin/python3}
install_dir="$root/opt/lifeguard"
unit="$root/etc/systemd/system/lifeguard-shipper.service"
bundle="$install_dir/lifeguard-node.pyz"
shown_location=${bundle_location%%\?*}  # never print a query string (presigned URLs carry credentials)

say() { echo "install-shipper: $*"; }

# dnf bounded in time: a node that cannot reach the package repositories (a private subnet without their
# endpoint) would otherwise be held by its retries for minutes, at every boot.
dnf_seconds=${LIFEGUARD_DNF_TIMEOUT_SECONDS:-300}
if ! "$python" -c 'import boto3' 2>/dev/null; then
    say "boto3 is missing for $python; installing python3-boto3"
    code=0
    timeout "$dnf_seconds" dnf install -y -q python3-boto3 || code=$?
    if [ "$code" -eq 124 ]; then
        say "dnf did not install python3-boto3 in $dnf_seconds s; nothing installed" >&2
        exit 1
    elif [ "$code" -ne 0 ]; then
        say "dnf could not install python3-boto3 (exit $code); nothing installed" >&2
        exit 1
    fi
fi

mkdir -p "$install_dir" "$(dirname "$unit")"
# A directory left from before with other modes or owner (the bundle and its temporary file live in it):
# root's first, so that its owner cannot open it again in between.
if [ "$(id -u)" -eq 0 ]; then chown 0:0 "$install_dir"; fi
chmod 0755 "$install_dir"
download=$(mktemp "$install_dir/.bundle.XXXXXX")
trap 'rm -f "$download"' EXIT
# The bundle is about 180 KB: a download is refused past this, and past these times, so neither a wrong
# location nor a stalled server fills the root volume or holds the boot.
max_bytes=$((8 * 1024 * 1024))
too_large() { say "the bundle at $shown_location is over $max_bytes bytes; nothing installed"; exit 3; }
case "$bundle_location" in
    s3://*)
        "$python" - "$bundle_location" "$download" "$bundle_version" "$max_bytes" <<'PY' || { [ $? -eq 3 ] && too_large; exit 1; }
import os, sys, boto3
from botocore.config import Config
bucket, _, key = sys.argv[1][len("s3://"):].partition("/")
endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
extra = {"VersionId": sys.argv[3]} if sys.argv[3] else {}
limit = int(sys.argv[4])
config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"})
# The agent gives scripts no AWS_REGION, and boto3 would then go to the commercial partition's S3, which
# refuses GovCloud's credentials: the instance's own region, through IMDSv2, as the shipper finds it.
region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
if not region and os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true":
    import http.client, urllib.request
    imds = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254").rstrip("/")
    def imds_read(path, method="GET", **headers):
        request = urllib.request.Request(imds + path, method=method, headers=headers)
        return urllib.request.urlopen(request, timeout=2).read().decode().strip()
    try:
        token = imds_read("/latest/api/token", "PUT", **{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        region = imds_read("/latest/meta-data/placement/region", **{"X-aws-ec2-metadata-token": token})
    except (OSError, ValueError, http.client.HTTPException):
        region = None  # boto3's own default: the commercial partition
print(f"install-shipper: fetching from S3 in {region or 'the default region'}", file=sys.stderr)
from botocore.exceptions import BotoCoreError, ClientError
try:
    s3 = boto3.client("s3", region_name=region or None, endpoint_url=endpoint or None, config=config)
    data = s3.get_object(Bucket=bucket, Key=key, **extra)["Body"].read(limit + 1)
except (BotoCoreError, ClientError) as exc:  # no role, a moved object, a deleted version: one line
    said = exc.response.get("Error", {}) if isinstance(exc, ClientError) else {}
    why = f"{said.get('Code')}: {said.get('Message')}" if said else str(exc)
    where = sys.argv[1] + (f" (version {sys.argv[3]})" if sys.argv[3] else "")
    why = " ".join(why.split())[:300]
    sys.exit(f"install-shipper: cannot fetch {where}: {why}; nothing installed")
if len(data) > limit:
    sys.exit(3)
with open(sys.argv[2], "wb") as out:
    out.write(data)
PY
        ;;
    https://*)
        if [ -n "$bundle_version" ]; then
            say "a version id applies to s3:// bundles only, not $shown_location; nothing installed"
            exit 2
        fi
        code=0
        why=$(curl --fail --silent --show-error --location --proto '=https' --retry 3 --retry-max-time 300 \
            --connect-timeout 10 --max-time 120 --max-filesize "$max_bytes" \
            -o "$download" "$bundle_location" 2>&1) || code=$?
        if [ "$code" -eq 63 ]; then too_large; fi
        if [ "$code" -ne 0 ]; then  # one line, as for s3://, and no query string (a presigned URL's)
            why=$(tail -n 1 <<< "$why" | sed -e 's/^curl: //' -e 's/?[^ ]*//g')
            say "cannot fetch $shown_location: ${why:-curl exit $code}; nothing installed" >&2
            exit 1
        fi
        # A server that sends no length is stopped by size only after the fact: the size is checked too.
        if [ "$(stat -c %s "$download")" -gt "$max_bytes" ]; then too_large; fi
        ;;
    *)
        say "cannot fetch $shown_location: only s3:// and https:// locations"
        exit 2
        ;;
esac

actual=$(sha256sum "$download" | cut -d' ' -f1)
if [ "$actual" != "${bundle_sha256,,}" ]; then
    say "checksum mismatch for $shown_location: expected $bundle_sha256, got $actual; nothing installed"
    exit 3
fi
# The node's Python must run the bundle: one that cannot (older than 3.9, or a bundle it cannot import)
# would leave a service failing every 2 s, no node report ever shipped, and nothing said.
if ! problem=$("$python" - "$download" 2>&1 <<'PY'
import sys, zipfile
if sys.version_info < (3, 9):
    sys.exit("the bundle needs Python 3.9 or later, not " + sys.version.split()[0])
if not zipfile.is_zipfile(sys.argv[1]):
    sys.exit("it is no Python zip application")
sys.path.insert(0, sys.argv[1])
import lifeguard.node.cli, lifeguard.node.shipper
if not lifeguard.node.shipper.__file__.startswith(sys.argv[1]):
    sys.exit("it holds no lifeguard.node")
PY
); then
    say "$python cannot run the bundle at $shown_location: $(tail -n 1 <<< "$problem"); nothing installed"
    exit 1
fi
chmod 0755 "$download"
# What is at the bundle's path may have been put there while the directory was open to all: a folder there
# would take the bundle in, and root would run the folder's own __main__.py. It goes (the directory is
# root's alone by now, so nothing comes back); a file or link there is replaced at once, as before.
if [ -d "$bundle" ] && [ ! -L "$bundle" ]; then rm -rf -- "$bundle"; fi
mv -fT "$download" "$bundle"

quote() { printf '"%s"' "${1//\"/\\\"}"; }
cat > "$unit.tmp" <<UNIT
[Unit]
Description=PCS Lifeguard node report shipper
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart=$python /opt/lifeguard/lifeguard-node.pyz ship --root / --log-group $(quote "$log_group") --cluster-id $(quote "${PCS_CLUSTER_ID:?PCS_CLUSTER_ID is not set}") --compute-node-group-id $(quote "${PCS_COMPUTE_NODE_GROUP_ID:?PCS_COMPUTE_NODE_GROUP_ID is not set}") --node-id $(quote "${PCS_NODE_ID:-$(hostname -s)}")
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
UNIT
chmod 0644 "$unit.tmp"
mv -f "$unit.tmp" "$unit"

systemctl daemon-reload
systemctl enable lifeguard-shipper.service
# restart, not start: on a reboot a new bundle replaces the running one.
systemctl restart lifeguard-shipper.service
say "shipping node reports to $log_group (bundle sha256 $actual${bundle_version:+, version $bundle_version})"
