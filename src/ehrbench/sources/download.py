"""Resumable download of a PhysioNet release into data/raw/<release>/.

Every downloaded file must match SHA256SUMS.txt: a mismatch deletes the file and downloads it again
once, then fails. Credentials (full releases) come from PHYSIONET_USERNAME / PHYSIONET_PASSWORD and
are never logged or put into error messages.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import httpx

from ehrbench.errors import ChecksumError, SourceError
from ehrbench.sources.checksums import read_checksums, sha256_file
from ehrbench.sources.releases import CHECKSUM_FILE, Release, TableSpec

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int | None], None]  # (relative path, bytes so far, total or None)


def physionet_auth() -> httpx.BasicAuth | None:
    user, password = os.environ.get("PHYSIONET_USERNAME"), os.environ.get("PHYSIONET_PASSWORD")
    return httpx.BasicAuth(user, password) if user and password else None


def download_release(release: Release, dest: Path, tables: Iterable[TableSpec] | None = None,
                     *, client: httpx.Client | None = None, progress: Progress | None = None) -> Path:
    """Fetch SHA256SUMS.txt and the release's table files into `dest`; return `dest`.

    Files already present with the right checksum are kept; partial files are resumed.
    Optional tables the server does not have (404) are skipped; the ingest records them as absent.
    """
    dest.mkdir(parents=True, exist_ok=True)
    own_client = client is None
    client = client or httpx.Client(auth=physionet_auth(), follow_redirects=True,
                                    timeout=httpx.Timeout(60.0, connect=20.0))
    try:
        sums_path = dest / CHECKSUM_FILE
        try:
            _fetch(client, release, CHECKSUM_FILE, sums_path, resume=False, progress=progress)
        except _NotFound:
            raise SourceError(f"{release.base_url}{CHECKSUM_FILE}: HTTP 404; expected the release's checksum "
                              f"list there (is {release.base_url} a {release.dataset} {release.version} "
                              "release folder?)") from None
        expected = read_checksums(sums_path)
        for spec in tables if tables is not None else release.tables:
            if spec.path not in expected:
                if spec.required:
                    raise SourceError(f"{release.base_url}{CHECKSUM_FILE} does not list required file "
                                      f"{spec.path} ({spec.dataset}.{spec.name})")
                continue
            _download_verified(client, release, spec, dest / spec.path, expected[spec.path], progress)
    finally:
        if own_client:
            client.close()
    return dest


def _download_verified(client: httpx.Client, release: Release, spec: TableSpec, target: Path,
                       expected: str, progress: Progress | None) -> None:
    if target.exists() and sha256_file(target) == expected:
        return
    for attempt in (1, 2):
        try:
            _fetch(client, release, spec.path, target, resume=attempt == 1, progress=progress)
        except _NotFound:
            if spec.required:
                raise SourceError(f"{release.base_url}{spec.path}: HTTP 404; required file for "
                                  f"{spec.dataset}.{spec.name}") from None
            return
        actual = sha256_file(target)
        if actual == expected:
            return
        target.unlink()
        log.warning("%s: SHA-256 %s does not match %s (attempt %d); deleted",
                    spec.path, actual, expected, attempt)
    raise ChecksumError(f"{release.base_url}{spec.path}: downloaded twice and its SHA-256 is {actual}, "
                        f"expected {expected} from {CHECKSUM_FILE}; the file was deleted")


class _NotFound(Exception):
    pass


def _fetch(client: httpx.Client, release: Release, relative: str, target: Path, *, resume: bool,
           progress: Progress | None) -> None:
    """Stream one file to `target`, resuming from `<target>.part` with an HTTP Range request."""
    url = release.base_url + relative
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    offset = part.stat().st_size if resume and part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 404:
                raise _NotFound(url)
            if response.status_code in (401, 403):
                raise SourceError(f"{url}: HTTP {response.status_code}; this release needs a credentialed "
                                  "PhysioNet account in PHYSIONET_USERNAME / PHYSIONET_PASSWORD")
            if response.status_code == 416:  # the .part is already complete
                part.replace(target)
                return
            response.raise_for_status()
            if response.status_code != 206:  # server ignored Range: start over
                offset = 0
            total = response.headers.get("Content-Length")
            total_bytes = offset + int(total) if total else None
            with part.open("ab" if offset else "wb") as f:
                done = offset
                for chunk in response.iter_bytes():  # as received: a dropped connection keeps them all
                    f.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(relative, done, total_bytes)
    except httpx.HTTPStatusError as exc:
        raise SourceError(f"{url}: HTTP {exc.response.status_code} while downloading") from None
    except httpx.TransportError as exc:
        raise SourceError(f"{url}: download failed ({type(exc).__name__}: {exc}); run again to resume "
                          f"from {part.stat().st_size if part.exists() else 0} bytes") from None
    part.replace(target)
