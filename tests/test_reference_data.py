"""The vendored reference data (tests/reference/) is what its README says it is: every file listed
in SHA256SUMS, every checksum equal, nothing unlisted."""

import hashlib
from pathlib import Path

REFERENCE = Path(__file__).resolve().parent / "reference"


def test_reference_files_match_their_checksums():
    listed = {}
    for line in (REFERENCE / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name.removeprefix("./")] = digest
    present = {str(p.relative_to(REFERENCE)) for p in REFERENCE.rglob("*") if p.is_file()}
    present -= {"SHA256SUMS", "README.md"}  # the folder's own index
    assert set(listed) == present
    for name, digest in listed.items():
        assert hashlib.sha256((REFERENCE / name).read_bytes()).hexdigest() == digest, name
