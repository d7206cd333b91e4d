"""SHA256SUMS.txt parsing, file hashing and the gzip completeness check."""

from __future__ import annotations

import gzip
import hashlib
import os

import pytest

from ehrbench.errors import SourceError
from ehrbench.sources.checksums import check_gzip_complete, read_checksums, sha256_file

A = "a" * 64
B = "0123456789abcdef" * 4


def test_read_checksums_accepts_text_binary_and_single_space_forms(tmp_path):
    sums = tmp_path / "SHA256SUMS.txt"
    sums.write_text(f"{A}  hosp/patients.csv.gz\n"        # sha256sum text mode
                    f"{B.upper()} *icu/icustays.csv.gz\n"  # binary mode, upper-case digits
                    "\n"
                    f"{A} LICENSE.txt\r\n")                 # PhysioNet's single space, CRLF
    assert read_checksums(sums) == {
        "hosp/patients.csv.gz": A,
        "icu/icustays.csv.gz": B,
        "LICENSE.txt": A,
    }


@pytest.mark.parametrize("bad", ["deadbeef  hosp/patients.csv.gz", A, "z" * 64 + "  hosp/patients.csv.gz"])
def test_malformed_line_names_file_and_line(tmp_path, bad):
    sums = tmp_path / "SHA256SUMS.txt"
    sums.write_text(f"{A}  LICENSE.txt\n{bad}\n")
    with pytest.raises(SourceError) as info:
        read_checksums(sums)
    message = str(info.value)
    assert f"{sums}:2" in message
    assert "64 hex digits" in message


def test_sha256_file_matches_hashlib_across_chunks(tmp_path):
    data = os.urandom((1 << 20) * 2 + 12345)  # more than two 1 MiB read chunks
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_sha256_file_of_empty_file(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert sha256_file(path) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_complete_gzip_passes(tmp_path):
    path = tmp_path / "ok.csv.gz"
    path.write_bytes(gzip.compress(b"a,b\n1,2\n" * 1000))
    check_gzip_complete(path)  # no exception


def test_truncated_gzip_is_reported(tmp_path):
    data = gzip.compress(os.urandom(50_000))  # incompressible: the cut lands inside the stream
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError) as info:
        check_gzip_complete(path)
    message = str(info.value)
    assert str(path) in message
    assert "truncated" in message.replace(str(path), "")  # the tmp path itself says "truncated"


def test_not_gzip_is_reported(tmp_path):
    path = tmp_path / "plain.csv.gz"
    path.write_bytes(b"subject_id,gender\n1,F\n")
    with pytest.raises(SourceError) as info:
        check_gzip_complete(path)
    message = str(info.value)
    assert str(path) in message
    assert "expected a gzip-compressed CSV" in message.replace(str(path), "")
