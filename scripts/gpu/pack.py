"""`gpu-suite --pack`: few files to copy back from a machine that returns a limited number
(the device tool here: 8 files of at most 16 MiB). Top-level reports stay as they are."""
import tarfile
from pathlib import Path

KEEP = ("*.json", "*.md", "summary.txt")  # top-level files left unpacked
PART_BYTES = 15_000_000


def pack(out: Path) -> list[Path]:
    """Every file under `out` except the top-level KEEP ones, into suite.tgz, split into
    suite.tgz.00, .01, ... when larger than PART_BYTES (`cat suite.tgz.* | tar xz` joins
    them); the packed files are removed. Returns the archive files."""
    keep = {p for pattern in KEEP for p in out.glob(pattern)}
    files = sorted(p for p in out.rglob("*") if p.is_file() and p not in keep
                   and not p.name.startswith("suite.tgz"))
    if not files:
        return []
    archive = out / "suite.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for p in files:
            tar.add(p, arcname=str(p.relative_to(out)))
    for p in files:
        p.unlink()
    for d in sorted((d for d in out.rglob("*") if d.is_dir()), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    if archive.stat().st_size <= PART_BYTES:
        return [archive]
    parts = []
    with open(archive, "rb") as f:
        while chunk := f.read(PART_BYTES):
            parts.append(out / f"suite.tgz.{len(parts):02d}")
            parts[-1].write_bytes(chunk)
    archive.unlink()
    return parts
