"""Downloading a release from a real HTTP server on 127.0.0.1 (resume, verification, auth, 404s)."""

from __future__ import annotations

import logging

import pytest

from ehrbench.errors import ChecksumError, SourceError
from ehrbench.sources.checksums import read_checksums, sha256_file
from ehrbench.sources.download import download_release
from ehrbench.sources.releases import CHECKSUM_FILE, release_for

from .fakes import write_release, write_sums

PATIENTS = "hosp/patients.csv.gz"


@pytest.fixture
def served(file_server, monkeypatch):
    """A fake MIMIC-IV release on the server; `release_for` points at it through the URL override."""
    counts = write_release(file_server.root, release_for("mimic_iv"))
    monkeypatch.setenv("EHRBENCH_MIMIC_IV_URL", file_server.url)
    monkeypatch.delenv("PHYSIONET_USERNAME", raising=False)
    monkeypatch.delenv("PHYSIONET_PASSWORD", raising=False)
    return file_server, counts


def _verified(dest, root):
    """Every file listed in the served SHA256SUMS.txt is in `dest` with that checksum."""
    sums = read_checksums(root / CHECKSUM_FILE)
    return {path: sha256_file(dest / path) == digest for path, digest in sums.items()}


def test_full_download(served, tmp_path):
    server, counts = served
    release = release_for("mimic_iv")
    dest = tmp_path / "raw" / release.slug
    progress = []
    assert download_release(release, dest, progress=lambda *args: progress.append(args)) == dest
    verified = _verified(dest, server.root)
    assert len(verified) == len(counts) and all(verified.values())
    assert (dest / CHECKSUM_FILE).read_bytes() == (server.root / CHECKSUM_FILE).read_bytes()
    assert not list(dest.rglob("*.part"))
    size = (server.root / PATIENTS).stat().st_size
    assert (PATIENTS, size, size) in progress  # last progress call for a file: all bytes of a known total


def test_verified_files_are_not_fetched_again(served, tmp_path):
    server, counts = served
    dest = tmp_path / "raw"
    download_release(release_for("mimic_iv"), dest)
    server.requests.clear()
    download_release(release_for("mimic_iv"), dest)
    assert [r.path for r in server.requests] == [CHECKSUM_FILE]


def test_subset_of_tables(served, tmp_path):
    server, _ = served
    release = release_for("mimic_iv")
    dest = tmp_path / "raw"
    download_release(release, dest, tables=[release.table("patients")])
    assert sorted(r.path for r in server.requests) == sorted([CHECKSUM_FILE, PATIENTS])
    assert sha256_file(dest / PATIENTS) == read_checksums(server.root / CHECKSUM_FILE)[PATIENTS]


def test_resume_from_partial_file(served, tmp_path):
    server, _ = served
    dest = tmp_path / "raw"
    data = (server.root / PATIENTS).read_bytes()
    n = len(data) // 2
    part = dest / (PATIENTS + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:n])

    download_release(release_for("mimic_iv"), dest)

    assert [r.range for r in server.gets(PATIENTS)] == [f"bytes={n}-"]
    assert (dest / PATIENTS).read_bytes() == data
    assert not part.exists()


def test_resume_after_connection_drop(served, tmp_path):
    """A transfer cut mid-body fails with SourceError, keeps its .part, and the next run resumes it."""
    server, _ = served
    dest = tmp_path / "raw"
    data = (server.root / PATIENTS).read_bytes()
    cut = len(data) // 3
    server.cut_once[PATIENTS] = cut

    with pytest.raises(SourceError) as info:
        download_release(release_for("mimic_iv"), dest)
    assert PATIENTS in str(info.value) and f"resume from {cut} bytes" in str(info.value)
    assert (dest / (PATIENTS + ".part")).read_bytes() == data[:cut]

    download_release(release_for("mimic_iv"), dest)
    assert [r.range for r in server.gets(PATIENTS)] == [None, f"bytes={cut}-"]
    assert (dest / PATIENTS).read_bytes() == data


def test_server_that_ignores_range_restarts_from_zero(served, tmp_path):
    server, _ = served
    server.honor_range = False
    dest = tmp_path / "raw"
    data = (server.root / PATIENTS).read_bytes()
    part = dest / (PATIENTS + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:10])
    download_release(release_for("mimic_iv"), dest)
    assert [r.range for r in server.gets(PATIENTS)] == ["bytes=10-"]  # asked, got 200 with everything
    assert (dest / PATIENTS).read_bytes() == data


def test_complete_part_file_gets_416_and_is_kept(served, tmp_path):
    server, _ = served
    dest = tmp_path / "raw"
    data = (server.root / PATIENTS).read_bytes()
    part = dest / (PATIENTS + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(data)
    download_release(release_for("mimic_iv"), dest)
    assert [r.range for r in server.gets(PATIENTS)] == [f"bytes={len(data)}-"]
    assert (dest / PATIENTS).read_bytes() == data


def test_checksum_mismatch_is_retried_once_then_fails(served, tmp_path, caplog):
    server, _ = served
    actual = sha256_file(server.root / PATIENTS)
    wrong = "c" * 64
    write_sums(server.root, overrides={PATIENTS: wrong})
    dest = tmp_path / "raw"

    with caplog.at_level(logging.WARNING), pytest.raises(ChecksumError) as info:
        download_release(release_for("mimic_iv"), dest)

    message = str(info.value)
    assert PATIENTS in message and actual in message and wrong in message
    assert len(server.gets(PATIENTS)) == 2
    assert all(r.range is None for r in server.gets(PATIENTS))  # the retry starts from scratch
    assert not (dest / PATIENTS).exists() and not (dest / (PATIENTS + ".part")).exists()
    assert "attempt 1" in caplog.text


def test_existing_file_with_wrong_checksum_is_replaced(served, tmp_path):
    server, _ = served
    dest = tmp_path / "raw"
    (dest / "hosp").mkdir(parents=True)
    (dest / PATIENTS).write_bytes(b"stale")
    download_release(release_for("mimic_iv"), dest)
    assert (dest / PATIENTS).read_bytes() == (server.root / PATIENTS).read_bytes()


def test_missing_required_file_is_an_error(served, tmp_path):
    server, _ = served
    (server.root / "icu" / "icustays.csv.gz").unlink()  # still listed in SHA256SUMS.txt
    with pytest.raises(SourceError) as info:
        download_release(release_for("mimic_iv"), tmp_path / "raw")
    message = str(info.value)
    assert f"{server.url}icu/icustays.csv.gz" in message and "HTTP 404" in message
    assert "mimic_iv.icustays" in message


def test_required_file_not_listed_in_sha256sums(served, tmp_path):
    server, _ = served
    sums = server.root / CHECKSUM_FILE
    sums.write_text("".join(line + "\n" for line in sums.read_text().splitlines() if PATIENTS not in line))
    with pytest.raises(SourceError) as info:
        download_release(release_for("mimic_iv"), tmp_path / "raw")
    assert "does not list required file hosp/patients.csv.gz" in str(info.value)
    assert not server.gets(PATIENTS)


def test_missing_optional_file_is_skipped(served, tmp_path):
    server, _ = served
    write_sums(server.root, extra={"hosp/omr.csv.gz": "d" * 64})  # listed, but the server has no such file
    dest = tmp_path / "raw"
    download_release(release_for("mimic_iv"), dest)
    assert len(server.gets("hosp/omr.csv.gz")) == 1
    assert not (dest / "hosp" / "omr.csv.gz").exists()
    assert (dest / PATIENTS).exists()


def test_missing_sha256sums_is_a_source_error(served, tmp_path):
    server, _ = served
    (server.root / CHECKSUM_FILE).unlink()
    with pytest.raises(SourceError) as info:
        download_release(release_for("mimic_iv"), tmp_path / "raw")
    assert f"{server.url}{CHECKSUM_FILE}" in str(info.value) and "HTTP 404" in str(info.value)


def test_credentials_from_environment_are_sent(served, tmp_path, monkeypatch):
    server, _ = served
    server.credentials = ("alice", "s3cret-pw")
    monkeypatch.setenv("PHYSIONET_USERNAME", "alice")
    monkeypatch.setenv("PHYSIONET_PASSWORD", "s3cret-pw")
    dest = tmp_path / "raw"
    download_release(release_for("mimic_iv", "full"), dest)
    assert all(_verified(dest, server.root).values())


def test_rejected_credentials_never_leak_the_password(served, tmp_path, monkeypatch, caplog):
    server, _ = served
    server.credentials = ("alice", "right-password")
    monkeypatch.setenv("PHYSIONET_USERNAME", "alice")
    monkeypatch.setenv("PHYSIONET_PASSWORD", "Wr0ng-P4ssw0rd")
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as info:
        download_release(release_for("mimic_iv", "full"), tmp_path / "raw")
    message = str(info.value)
    assert "HTTP 401" in message and "PHYSIONET_USERNAME" in message
    assert f"{server.url}{CHECKSUM_FILE}" in message
    assert server.requests[0].authorization  # the credentials were actually sent
    for text in (message, repr(info.value), caplog.text):
        assert "Wr0ng-P4ssw0rd" not in text
