"""Fetching lifecycle scripts: a registry of fetchers by URL scheme, with PCS's retry, size and checksum
rules around them.

A fetch is tried three times with exponential backoff; a script over 2 MiB, or whose sha256 is not its
`checksum`, or a download shorter than its answer said, or one try that took over `TRY_SECONDS` in all,
is a failed fetch. Locations are logged without query string or fragment, ever.
"""

from __future__ import annotations

import hashlib
import http.client
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from lifeguard.errors import LifeguardError
from lifeguard.node.boto import MissingBoto3Error, instance_region, node_client

__all__ = [
    "DOWNLOAD_TIMEOUT_SECONDS",
    "FETCHERS",
    "FETCH_ATTEMPTS",
    "MAX_SCRIPT_BYTES",
    "FetchError",
    "HttpsFetcher",
    "S3Fetcher",
    "ScriptFetcher",
    "fetch_script",
    "redact",
]

MAX_SCRIPT_BYTES = 2 * 1024 * 1024
# What a fetch's failure says of a try at most (`_clipped`).
REASON_MAX_CHARS = 1_000
FETCH_ATTEMPTS = 3
DOWNLOAD_TIMEOUT_SECONDS = 60.0
CONNECT_TIMEOUT_SECONDS = 10.0
# One try in all, from its connection to its last byte, whatever the scheme.
TRY_SECONDS = CONNECT_TIMEOUT_SECONDS + DOWNLOAD_TIMEOUT_SECONDS


class FetchError(LifeguardError):
    """A script could not be fetched; the message names the location without its query string."""


def redact(location: str) -> str:
    """The location without query string or fragment (presigned URLs carry credentials there). An s3://
    location is its bucket and key whole: `?` and `#` are characters of a key, and no credential rides in
    one."""
    if location.startswith("s3://"):
        return location
    parts = urllib.parse.urlsplit(location)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class ScriptFetcher(ABC):
    """Fetches one kind of location; `permissions` is what the node's instance role needs for it."""

    scheme: ClassVar[str]
    permissions: ClassVar[tuple[str, ...]]

    @abstractmethod
    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        """One attempt: the content (at most MAX_SCRIPT_BYTES + 1 bytes read), or an exception."""


FETCHERS: dict[str, type[ScriptFetcher]] = {}


def register_fetcher(cls: type[ScriptFetcher]) -> type[ScriptFetcher]:
    """Class decorator: make `cls` the fetcher of its scheme."""
    FETCHERS[cls.scheme] = cls
    return cls


# One request a try: `fetch_script`'s tries are the retries (botocore's own would make 3 tries 15), each
# bounded as an https download is.
_S3_CONFIG = {
    "retries": {"total_max_attempts": 1},
    "connect_timeout": CONNECT_TIMEOUT_SECONDS,
    "read_timeout": DOWNLOAD_TIMEOUT_SECONDS,
}


@register_fetcher
class S3Fetcher(ScriptFetcher):
    """`s3://bucket/key` through boto3, honouring `s3VersionId` and boto3's standard configuration."""

    scheme = "s3"
    permissions = ("s3:GetObject", "s3:GetObjectVersion")

    def __init__(self) -> None:
        self._client: Any = None

    def _s3(self) -> Any:
        if self._client is None:
            try:
                # The node's region when nothing names one: else boto3 asks us-east-1's endpoint, which a
                # private subnet's S3 gateway endpoint does not reach (every fetch fails: a loop).
                self._client = node_client("s3", "s3:// scripts", region=instance_region, config=_S3_CONFIG)
            except MissingBoto3Error as exc:
                raise FetchError(str(exc)) from None
        return self._client

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        """GetObject, of the given version when there is one."""
        bucket, _, key = location[len("s3://") :].partition("/")
        request: dict[str, str] = {"Bucket": bucket, "Key": key}
        if version_id:
            request["VersionId"] = version_id
        response = self._s3().get_object(**request)
        body = response["Body"]
        try:
            data: bytes = body.read(MAX_SCRIPT_BYTES + 1)
        finally:
            body.close()
        _whole(data, response.get("ContentLength"))
        given = response.get("VersionId")
        if version_id and given != version_id:
            # An endpoint that let the version go (a store of S3's API without versions, a proxy): another
            # version, kept in the cache as the one pinned, and run at every reboot after.
            raise FetchError(f"S3 answered version {given!r} for s3VersionId {version_id!r}")
        return data


@register_fetcher
class HttpsFetcher(ScriptFetcher):
    """`https://` with certificate verification (the system's trust store, or `cafile`)."""

    scheme = "https"
    permissions = ()

    def __init__(self, cafile: str | None = None) -> None:
        self._context = ssl.create_default_context(cafile=cafile)
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=self._context), _HttpsRedirectsOnly()
        )

    def fetch_once(self, location: str, version_id: str | None) -> bytes:
        """GET the URL; any status but 200 is a failure, and so is a redirect to anything but https, or a
        download that takes longer than `DOWNLOAD_TIMEOUT_SECONDS` in all (not only between two reads)."""
        request = urllib.request.Request(_ascii_url(location), headers={"User-Agent": "pcs-lifeguard-node"})
        deadline = time.monotonic() + DOWNLOAD_TIMEOUT_SECONDS
        try:
            with self._opener.open(request, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
                if response.status != 200:  # urllib raises for none of 2xx: a 204 is no script, a 206 a part
                    raise FetchError(
                        f"HTTP {response.status} {response.reason}: a script comes with 200 only"
                    )
                data = bytearray()
                while len(data) <= MAX_SCRIPT_BYTES:
                    chunk: bytes = response.read1(MAX_SCRIPT_BYTES + 1 - len(data))
                    if not chunk:
                        break
                    data += chunk
                    if time.monotonic() > deadline:
                        raise FetchError(f"the download took longer than {DOWNLOAD_TIMEOUT_SECONDS:g} s")
                length = _length(response.headers.get_all("Content-Length") or [])
        except urllib.error.HTTPError as exc:
            raise FetchError(f"HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise FetchError(str(exc.reason)) from None
        except http.client.HTTPException as exc:  # a chunked body cut short, an answer that is not HTTP
            raise FetchError(f"the download broke off ({type(exc).__name__})") from None
        _whole(bytes(data), length)
        return bytes(data)


# What a URL may hold as it is: printable ASCII (`%` too, so escapes already made stay as they are).
_AS_IS = "".join(chr(code) for code in range(0x21, 0x7F))


def _ascii_url(location: str) -> str:
    """The URL as HTTP can send it: its path, query and fragment percent-encoded as UTF-8 beyond ASCII (as
    a browser sends them; PCS takes a host of ASCII alone). A lifecycle configuration takes such a URL, and
    http.client refuses it as given: every boot would fail the fetch, under TERMINATE a loop."""
    if location.isascii():
        return location
    scheme, netloc, *rest = urllib.parse.urlsplit(location)
    path, query, fragment = (urllib.parse.quote(part, safe=_AS_IS) for part in rest)
    return urllib.parse.urlunsplit((scheme, netloc, path, query, fragment))


def _length(values: list[str]) -> int | None:
    """The body's length its Content-Length headers give: one value, or the same value given again (a
    proxy that merged two headers into `67, 67`, which HTTP lets a client take), in digits; else None."""
    given = {part.strip() for value in values for part in value.split(",")}
    if len(given) != 1:
        return None
    [value] = given
    value = value.lstrip("+")  # http.client takes `+67` as 67, and waits for 67 bytes
    return int(value) if value.isdigit() else None


def _whole(data: bytes, length: int | None) -> None:
    """Refuse a body shorter than the length its answer gave: a connection cut mid-body ends a read as the
    body's end would (neither http.client nor botocore on the node says otherwise), and the first part of
    a script is another script, run as root."""
    if length is not None and len(data) < length and len(data) <= MAX_SCRIPT_BYTES:
        raise FetchError(f"the download was cut short: {len(data)} of {length} bytes")


def _in_time(call: Callable[[], bytes], seconds: float) -> bytes:
    """`call()` (one try of a fetch), or FetchError once it has taken `seconds` in all: a socket's timeout
    bounds each read, not the whole, and a far end that sends a byte at a time (a header, a body) would
    hold the boot for as long as it liked. The try is left to end in its thread (a daemon: the boot goes
    on, and its process exits without waiting for it)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name="fetch", daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise FetchError(f"the download took longer than {seconds:g} s")
    done, value = outcome[0]
    if not done:
        raise value
    data: bytes = value
    return data


class _HttpsRedirectsOnly(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another https:// location: a script fetched over https must not be
    served over plain http, where anyone on the path may change it. A 308 (Permanent Redirect, a CDN's)
    too: the node's Python 3.9 follows 301, 302, 303 and 307 only (3.11 added 308), and a script there
    failed its fetch on the node where this Python took it. For a GET it is a 307's."""

    def redirect_request(  # noqa: PLR0917 - urllib calls it so
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        if urllib.parse.urlsplit(newurl).scheme != "https":
            raise urllib.error.HTTPError(
                newurl, code, "redirected to a location that is not https", headers, fp
            )
        return super().redirect_request(req, fp, 307 if code == 308 else code, msg, headers, newurl)

    http_error_308 = urllib.request.HTTPRedirectHandler.http_error_302


def fetch_script(
    location: str,
    *,
    version_id: str | None = None,
    checksum: str | None = None,
    attempts: int = FETCH_ATTEMPTS,
    backoff_seconds: float = 1.0,
    fetchers: dict[str, ScriptFetcher] | None = None,
    on_retry: Callable[[int, str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> bytes:
    """The script's content, verified; raises FetchError after `attempts` failed tries.

    Waits `backoff_seconds`, then twice that, … between tries; `on_retry(attempt, reason)` hears of each
    failed try that will be retried.
    """
    scheme = urllib.parse.urlsplit(location).scheme
    fetcher = (fetchers or {}).get(scheme)
    if fetcher is None:
        if scheme not in FETCHERS:
            raise FetchError(f"no fetcher for {scheme}:// locations ({redact(location)})")
        fetcher = FETCHERS[scheme]()
    safe = redact(location)
    reason = "no attempt made"
    for attempt in range(1, attempts + 1):
        try:
            return _verified(
                _in_time(partial(fetcher.fetch_once, location, version_id), TRY_SECONDS), checksum
            )
        except Exception as exc:  # noqa: BLE001 - any failure of a try is retried, then reported
            reason = _clipped(_describe(exc).replace(location, safe))  # the location's secrets out first
        if attempt < attempts:
            if on_retry is not None:
                on_retry(attempt, reason)
            sleep(backoff_seconds * 2 ** (attempt - 1))
    raise FetchError(f"cannot fetch {safe} after {attempts} attempts: {reason}")


def _verified(data: bytes, checksum: str | None) -> bytes:
    if len(data) > MAX_SCRIPT_BYTES:
        raise FetchError(f"script is larger than {MAX_SCRIPT_BYTES // (1024 * 1024)} MiB")
    if checksum is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != checksum.lower():
            raise FetchError(f"checksum mismatch: expected sha256 {checksum.lower()}, got {actual}")
    return data


def _clipped(reason: str) -> str:
    """A try's failure as said at most: its text is an endpoint's (an S3-compatible store's error message, a
    server's reason phrase), of any length, and goes into executor.log, whose records the shipper reads a
    megabyte at a time (a longer one is passed over, the failure's report with it), and into the report."""
    if len(reason) <= REASON_MAX_CHARS:
        return reason
    return f"{reason[:REASON_MAX_CHARS]}... ({len(reason)} characters in all)"


def _describe(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return str(exc) or type(exc).__name__
