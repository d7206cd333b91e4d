"""SHA-256 verification against a release's SHA256SUMS.txt."""

from __future__ import annotations

import gzip
import hashlib
import string
import zlib
from enum import StrEnum
from pathlib import Path

from ehrbench.errors import SourceError

_CHUNK = 1 << 20


class Verification(StrEnum):
    VERIFIED = "verified"          # matches SHA256SUMS.txt
    MISMATCH = "mismatch"          # differs from SHA256SUMS.txt
    UNLISTED = "unlisted"          # no SHA256SUMS.txt line (or no SHA256SUMS.txt) for this file
    ABSENT = "absent"              # optional file not present


def read_checksums(path: Path) -> dict[str, str]:
    """Parse `sha256sum` output: `<hex> [*]<relative path>` per line."""
    sums: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64 or not set(parts[0]) <= set(string.hexdigits):
            raise SourceError(f"{path}:{number}: expected '<64 hex digits> <path>', got {line[:80]!r}")
        sums[parts[1].lstrip("*").strip()] = parts[0].lower()
    return sums


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_gzip_complete(path: Path) -> None:
    """Decompress the whole stream: a truncated .csv.gz can otherwise load silently as fewer rows."""
    try:
        with gzip.open(path, "rb") as f:
            while f.read(_CHUNK):
                pass
    except (EOFError, OSError, zlib.error) as exc:
        raise SourceError(f"{path}: not a complete gzip file ({exc}); expected a gzip-compressed CSV "
                          "— the file is truncated or corrupt, download it again") from None
