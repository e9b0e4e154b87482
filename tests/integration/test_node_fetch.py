"""Script fetching: https with certificate verification on loopback TLS, retries, limits, redaction."""

from __future__ import annotations

import hashlib
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lifeguard.node import fetch
from lifeguard.node.fetch import MAX_SCRIPT_BYTES, FetchError, HttpsFetcher, ScriptFetcher, fetch_script
from tests.conftest import NODE_PYTHON, REPO

pytestmark = pytest.mark.integration
SCRIPT = b"#!/bin/bash\necho from https\n"
# A script whose first 25 bytes are another script: `rm -rf /var/t`.
WHOLE = b"#!/bin/bash\nrm -rf /var/tmp/build-cache/stale-objects\necho cleaned\n"


# Content-Length as said: plainly; with a sign, which http.client reads; twice, merged by a proxy.
CUT = {
    "/cut.sh": str(len(WHOLE)),
    "/cut-plus.sh": f"+{len(WHOLE)}",
    "/cut-twice.sh": f"{len(WHOLE)}, {len(WHOLE)}",
}


class Scripts(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path in {"/to-http.sh", "/to-https.sh", "/moved-308.sh", "/moved-307.sh", "/moved-308-http.sh"}:
            scheme = "http" if "http.sh" in path and "https" not in path else "https"
            code = int(path[7:10]) if path.startswith("/moved-") else 302
            self.send_response(code)
            self.send_header("Location", f"{scheme}://localhost:{self.server.server_address[1]}/ok.sh")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path in CUT:  # the connection drops after 25 of the 67 bytes said (as each path says them)
            self.send_response(200)
            self.send_header("Content-Length", CUT[path])
            self.end_headers()
            self.wfile.write(WHOLE[:25])
            self.close_connection = True
            return
        if path == "/slow-head.sh":  # the answer's head a byte every 0.1 s: no body read ever starts
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for byte in b"X-Padding: " + b"x" * 60 + b"\r\n":
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.1)
            return
        if path == "/slow.sh":  # a byte every 0.1 s: each read is quick, the whole never ends in time
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b"#")
                self.wfile.flush()
                time.sleep(0.1)
            return
        if path in {"/no-content.sh", "/part.sh"}:  # 2xx answers that carry no script, or a part of one
            status, part = (204, b"") if path == "/no-content.sh" else (206, WHOLE[:25])
            self.send_response(status)
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            self.wfile.write(part)
            return
        body = {
            "/ok.sh": SCRIPT,
            "/setup-%C3%A9.sh": SCRIPT,  # setup-é.sh, as a client must send it
            "/big.sh": b"#" * (MAX_SCRIPT_BYTES + 1),
            "/largest.sh": b"#" * MAX_SCRIPT_BYTES,
        }.get(path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """TLS on 127.0.0.1 with a self-signed certificate for `localhost`; yields (base URL, CA file)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripts)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://localhost:{server.server_address[1]}", str(cert)
    server.shutdown()
    server.server_close()


def no_sleep(seconds: float) -> None:
    pass


def test_https_fetch_verifies_the_certificate_and_the_checksum(https_server: tuple[str, str]) -> None:
    base, ca = https_server
    fetchers: dict[str, ScriptFetcher] = {"https": HttpsFetcher(cafile=ca)}
    digest = hashlib.sha256(SCRIPT).hexdigest()
    assert fetch_script(f"{base}/ok.sh", checksum=digest, fetchers=fetchers, sleep=no_sleep) == SCRIPT


def test_an_untrusted_certificate_is_a_failed_fetch(https_server: tuple[str, str]) -> None:
    base, _ = https_server
    with pytest.raises(FetchError, match=r"after 3 attempts: .*CERTIFICATE_VERIFY_FAILED"):
        fetch_script(f"{base}/ok.sh", fetchers={"https": HttpsFetcher()}, sleep=no_sleep)


def test_a_query_string_is_never_in_an_error(https_server: tuple[str, str]) -> None:
    base, ca = https_server
    with pytest.raises(FetchError) as caught:
        fetch_script(
            f"{base}/missing.sh?X-Amz-Signature=s3cr3t&X-Amz-Credential=AKIA",
            fetchers={"https": HttpsFetcher(cafile=ca)},
            sleep=no_sleep,
        )
    assert "HTTP 404" in str(caught.value)
    assert f"{base}/missing.sh" in str(caught.value)
    assert "s3cr3t" not in str(caught.value)
    assert "AKIA" not in str(caught.value)


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("s3://my-bucket/setup#v2.sh", "s3://my-bucket/setup#v2.sh"),  # `#` and `?` are a key's characters
        ("s3://my-bucket/tools?/setup.sh", "s3://my-bucket/tools?/setup.sh"),
        ("https://example.com/s.sh?X-Amz-Signature=s3cr3t#frag", "https://example.com/s.sh"),
    ],
)
def test_an_s3_key_is_named_whole_and_an_https_query_never(location: str, shown: str) -> None:
    assert fetch.redact(location) == shown


def test_a_script_over_2_mib_is_refused(https_server: tuple[str, str]) -> None:
    base, ca = https_server
    with pytest.raises(FetchError, match="larger than 2 MiB"):
        fetch_script(f"{base}/big.sh", fetchers={"https": HttpsFetcher(cafile=ca)}, sleep=no_sleep)


def test_a_script_of_2_mib_exactly_is_fetched(https_server: tuple[str, str]) -> None:
    """DESIGN: scripts of up to 2 MiB; the largest is taken, not failed (a TERMINATE loop of its own)."""
    base, ca = https_server
    fetched = fetch_script(f"{base}/largest.sh", fetchers={"https": HttpsFetcher(cafile=ca)}, sleep=no_sleep)
    assert fetched == b"#" * MAX_SCRIPT_BYTES


@pytest.mark.parametrize(("path", "status"), [("no-content.sh", "204 No Content"), ("part.sh", "206")])
def test_an_answer_of_2xx_other_than_200_is_a_failed_fetch(
    https_server: tuple[str, str], path: str, status: str
) -> None:
    """urllib raises for no 2xx status: a 204 would have run an empty script as a success (a mount never
    made, and the boot going on), a 206 the first part of one."""
    base, ca = https_server
    with pytest.raises(FetchError, match=f"HTTP {status}.*: a script comes with 200 only"):
        fetch_script(
            f"{base}/{path}", fetchers={"https": HttpsFetcher(cafile=ca)}, attempts=1, sleep=no_sleep
        )


def test_a_url_beyond_ascii_is_fetched_percent_encoded(https_server: tuple[str, str]) -> None:
    """A lifecycle configuration takes `https://.../setup-é.sh`; http.client refuses the URL as given, and
    every boot would fail its fetch."""
    base, ca = https_server
    fetchers: dict[str, ScriptFetcher] = {"https": HttpsFetcher(cafile=ca)}
    assert fetch_script(f"{base}/setup-é.sh", fetchers=fetchers, sleep=no_sleep) == SCRIPT
    assert fetch_script(f"{base}/setup-%C3%A9.sh", fetchers=fetchers, sleep=no_sleep) == SCRIPT
    assert fetch._ascii_url("https://scripts.example.com:8443/é%20x?x=ü#ß") == (
        "https://scripts.example.com:8443/%C3%A9%20x?x=%C3%BC#%C3%9F"
    )


def test_a_redirect_is_followed_to_https_only(https_server: tuple[str, str]) -> None:
    """A script asked for over https is never taken over plain http, where anyone on the path may change
    it."""
    base, ca = https_server
    fetchers: dict[str, ScriptFetcher] = {"https": HttpsFetcher(cafile=ca)}
    assert fetch_script(f"{base}/to-https.sh", fetchers=fetchers, sleep=no_sleep) == SCRIPT
    with pytest.raises(FetchError, match="HTTP 302 redirected to a location that is not https"):
        fetch_script(f"{base}/to-http.sh", fetchers=fetchers, sleep=no_sleep)
    with pytest.raises(FetchError, match="HTTP 308 redirected to a location that is not https"):
        fetch_script(f"{base}/moved-308-http.sh", fetchers=fetchers, sleep=no_sleep)


def test_a_permanent_redirect_is_followed_on_the_nodes_python_too(https_server: tuple[str, str]) -> None:
    """A CDN's 308 (Permanent Redirect) to https: the node's Python 3.9 urllib follows 301, 302, 303 and 307
    only, so a script there was a failed fetch (under TERMINATE, a bootstrap failure PCS's node would not
    have), while this Python followed it."""
    base, ca = https_server
    fetchers: dict[str, ScriptFetcher] = {"https": HttpsFetcher(cafile=ca)}
    for moved in ("moved-307.sh", "moved-308.sh"):
        assert fetch_script(f"{base}/{moved}", fetchers=fetchers, sleep=no_sleep) == SCRIPT
    if not NODE_PYTHON.exists():
        pytest.skip("no Python 3.9 venv (.venv/node39): setup.sh found no python3.9")
    program = (
        "import sys\n"
        "from lifeguard.node.fetch import FetchError, HttpsFetcher, fetch_script\n"
        "fetchers = {'https': HttpsFetcher(cafile=sys.argv[2])}\n"
        "for moved in ('moved-307.sh', 'moved-308.sh', 'moved-308-http.sh'):\n"
        "    try:\n"
        "        url = sys.argv[1] + '/' + moved\n"
        "        got = fetch_script(url, attempts=1, fetchers=fetchers, sleep=lambda s: None)\n"
        "        print(moved, got == " + repr(SCRIPT) + ")\n"
        "    except FetchError as exc:\n"
        "        print(moved, exc)\n"
    )
    environ = {"PYTHONPATH": str(REPO / "layers" / "lifeguard"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(NODE_PYTHON), "-c", program, base, ca],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert lines[:2] == ["moved-307.sh True", "moved-308.sh True"], done.stdout + done.stderr
    assert "HTTP 308 redirected to a location that is not https" in lines[2], done.stdout


def test_a_download_that_trickles_is_cut_at_the_timeout_in_all(
    https_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket's timeout holds between two reads only: a server that sends a byte now and then would
    keep a boot waiting for ever."""
    # Also each read's timeout: long enough for a busy machine's TLS handshake with this process's server.
    monkeypatch.setattr(fetch, "DOWNLOAD_TIMEOUT_SECONDS", 1.5)
    base, ca = https_server
    began = time.monotonic()
    with pytest.raises(FetchError, match=r"the download took longer than 1.5 s"):
        fetch_script(
            f"{base}/slow.sh", fetchers={"https": HttpsFetcher(cafile=ca)}, attempts=1, sleep=no_sleep
        )
    assert time.monotonic() - began < 5  # the server trickles for 10 s


@pytest.mark.parametrize("path", list(CUT))
def test_a_body_cut_short_is_a_failed_fetch_never_a_shorter_script(
    https_server: tuple[str, str], path: str
) -> None:
    """http.client ends a read where the connection dropped as it ends one at the body's end: the first
    part of a script is another script, run as root. A length said `+67`, or `67, 67`, was not read as one,
    and the 25 bytes came back a script."""
    base, ca = https_server
    with pytest.raises(FetchError, match="the download was cut short: 25 of 67 bytes"):
        fetch_script(f"{base}{path}", fetchers={"https": HttpsFetcher(cafile=ca)}, attempts=1, sleep=no_sleep)


def test_an_answer_whose_head_trickles_is_cut_at_the_time_a_try_has_in_all(
    https_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetch, "TRY_SECONDS", 0.5)
    base, ca = https_server
    began = time.monotonic()
    with pytest.raises(FetchError, match=r"the download took longer than 0.5 s"):
        fetch_script(
            f"{base}/slow-head.sh", fetchers={"https": HttpsFetcher(cafile=ca)}, attempts=1, sleep=no_sleep
        )
    assert time.monotonic() - began < 2


class Flaky(ScriptFetcher):
    """Fails a given number of times, then serves the content."""

    scheme = "s3"
    permissions = ()

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"attempt {self.calls} failed")
        return b"echo ok\n"


def test_three_attempts_with_exponential_backoff() -> None:
    waits: list[float] = []
    retries: list[tuple[int, str]] = []
    flaky = Flaky(failures=2)
    content = fetch_script(
        "s3://bucket/x.sh",
        fetchers={"s3": flaky},
        backoff_seconds=0.5,
        sleep=waits.append,
        on_retry=lambda attempt, reason: retries.append((attempt, reason)),
    )
    assert content == b"echo ok\n"
    assert waits == [0.5, 1.0]
    assert retries == [(1, "attempt 1 failed"), (2, "attempt 2 failed")]
    with pytest.raises(FetchError, match="after 3 attempts: attempt 3 failed"):
        fetch_script("s3://bucket/x.sh", fetchers={"s3": Flaky(failures=3)}, sleep=no_sleep)


def test_the_s3_version_id_is_honoured(node: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    s3 = node.s3
    s3.put_bucket_versioning(Bucket=node.bucket, VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket=node.bucket, Key="v.sh", Body=b"echo v1\n")["VersionId"]
    s3.put_object(Bucket=node.bucket, Key="v.sh", Body=b"echo v2\n")
    for key, value in node.env.items():
        monkeypatch.setenv(key, value)
    assert fetch_script(f"s3://{node.bucket}/v.sh", version_id=first, sleep=no_sleep) == b"echo v1\n"
    assert fetch_script(f"s3://{node.bucket}/v.sh", sleep=no_sleep) == b"echo v2\n"


class Unavailable(BaseHTTPRequestHandler):
    """S3 in an outage: every GetObject is answered 503, and counted."""

    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b"<Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>"
        self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class BrokenS3(BaseHTTPRequestHandler):
    """S3 whose GetObject answers the whole script's length, then sends 25 bytes and drops the connection
    (`/bucket/cut.sh`), or sends its bytes one every 0.2 s (`/bucket/slow.sh`)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(WHOLE)))
        self.send_header("Content-Type", "binary/octet-stream")
        if self.path.startswith("/bucket/unversioned.sh"):
            self.send_header("x-amz-version-id", "latest-version")
        self.end_headers()
        if self.path.startswith("/bucket/cut.sh"):
            self.wfile.write(WHOLE[:25])
            self.close_connection = True
            return
        if self.path.startswith("/bucket/unversioned.sh"):  # any versionId asked: the object it holds
            self.wfile.write(WHOLE)
            return
        for byte in WHOLE:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(0.2)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def broken_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The S3 endpoint of `BrokenS3` for boto3, through the environment as on a node; yields that
    environment."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BrokenS3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    environ = {
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{server.server_port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    yield environ
    server.shutdown()
    server.server_close()


def test_an_s3_version_other_than_the_one_asked_is_a_failed_fetch(broken_s3: dict[str, str]) -> None:
    """An endpoint that lets `versionId` go gave another version, which the cache then kept as the one
    pinned and every reboot ran."""
    with pytest.raises(FetchError, match="S3 answered version 'latest-version' for s3VersionId 'pinned-v1'"):
        fetch_script("s3://bucket/unversioned.sh", version_id="pinned-v1", attempts=1, sleep=no_sleep)
    assert fetch_script("s3://bucket/unversioned.sh", attempts=1, sleep=no_sleep) == WHOLE


def test_an_s3_body_cut_short_is_a_failed_fetch_on_the_nodes_python(broken_s3: dict[str, str]) -> None:
    """botocore checks a body's length only on a read of all of it: a sized read that comes back short is
    returned as it is (on the node's Python 3.9 and its urllib3 1.26, as here)."""
    with pytest.raises(FetchError, match="cut short: 25 of 67 bytes"):
        fetch_script("s3://bucket/cut.sh", attempts=1, sleep=no_sleep)
    if NODE_PYTHON.exists():
        program = (
            "from lifeguard.node.fetch import FetchError, fetch_script\n"
            "try:\n"
            "    fetch_script('s3://bucket/cut.sh', attempts=1, sleep=lambda s: None)\n"
            "except FetchError as exc:\n"
            "    print(exc)\n"
        )
        environ = {**broken_s3, "PYTHONPATH": str(REPO / "layers" / "lifeguard"), "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [str(NODE_PYTHON), "-c", program],
            capture_output=True,
            text=True,
            env=environ,
            timeout=60,
            check=False,
        )
        assert "cut short: 25 of 67 bytes" in done.stdout, done.stdout + done.stderr


def test_an_s3_download_that_trickles_is_bounded_in_all_as_an_https_one_is(
    broken_s3: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetch, "TRY_SECONDS", 1.0)
    began = time.monotonic()
    with pytest.raises(FetchError, match=r"the download took longer than 1 s"):
        fetch_script("s3://bucket/slow.sh", attempts=1, sleep=no_sleep)
    assert time.monotonic() - began < 3


def test_an_s3_download_that_keeps_failing_is_three_requests_not_botocores_five_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DESIGN: downloads are tried 3 times with backoff. botocore's own retries inside each try made them
    15 requests (and, with S3 out of reach, minutes of a node's boot)."""
    Unavailable.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name in ("AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    try:
        with pytest.raises(FetchError, match="after 3 attempts"):
            fetch_script("s3://lca-scripts-example/scripts/mount.sh", sleep=no_sleep)
    finally:
        server.shutdown()
        server.server_close()
    assert len(Unavailable.hits) == 3


class Imds(BaseHTTPRequestHandler):
    """IMDSv2 on loopback: a token for a PUT, the instance's region for a GET that carries it."""

    region = b"eu-south-2"

    def do_PUT(self) -> None:
        self._answer(b"token-1" if self.path == "/latest/api/token" else None)

    def do_GET(self) -> None:
        known = self.headers.get("X-aws-ec2-metadata-token") == "token-1"
        self._answer(self.region if known and self.path == "/latest/meta-data/placement/region" else None)

    def _answer(self, body: bytes | None) -> None:
        self.send_response(200 if body is not None else 401)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_s3_scripts_are_fetched_in_the_instances_region_which_pcs_does_not_give_its_scripts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a region boto3 asks us-east-1's S3 endpoint: another partition's (GovCloud, China) refuses
    the node's credentials, and a private subnet whose S3 gateway endpoint is its own region's cannot reach
    it. Every fetch would fail, under TERMINATE a loop: the node's own region is asked, as the shipper
    does; off EC2 (no metadata service) boto3's default stays."""
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Imds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert fetch.S3Fetcher()._s3().meta.region_name == "eu-south-2"
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # turned off, as boto3 honours it
        assert fetch.S3Fetcher()._s3().meta.region_name == "us-east-1"
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        monkeypatch.setattr(
            Imds, "region", b"eu-south-2/../../x"
        )  # no region's name: boto3's default, never a made-up endpoint
        assert fetch.S3Fetcher()._s3().meta.region_name == "us-east-1"
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert fetch.S3Fetcher()._s3().meta.region_name == "us-east-1"
    monkeypatch.setenv("AWS_REGION", "ap-south-1")  # a region named is taken before the instance's
    assert fetch.S3Fetcher()._s3().meta.region_name == "ap-south-1"
