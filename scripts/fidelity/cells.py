"""Finished cells on disk: each (method, budget) result is written as it finishes, and a rerun
skips it. A cell made under other settings is an error, never silently reused or replaced."""
import json
import os
from pathlib import Path


class CellMismatch(RuntimeError):
    pass


def _canonical(key) -> str:
    return json.dumps(key, sort_keys=True)


class CellStore:
    def __init__(self, root: str):
        self.root = Path(root)

    def path(self, name: str) -> Path:
        return self.root / f"{name}.json"

    def load(self, name: str, key) -> dict | None:
        """The stored cell `name`, None if absent; CellMismatch if it was made with another key."""
        path = self.path(name)
        if not path.exists():
            return None
        with open(path) as f:
            cell = json.load(f)
        if _canonical(cell.get("key")) != _canonical(key):
            raise CellMismatch(
                f"{path} was made with other settings:\n  stored {_canonical(cell.get('key'))}"
                f"\n  asked  {_canonical(key)}\nuse another --out, or delete the file to redo it")
        return cell

    def save(self, name: str, key, **payload) -> dict:
        """Write the cell atomically (a crash leaves the old file or none, never half a file)."""
        self.root.mkdir(parents=True, exist_ok=True)
        cell = dict(key=key, **payload)
        tmp = self.path(name).with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(cell, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path(name))
        return cell

    def get_or_run(self, name: str, key, run) -> tuple[dict, bool]:
        """(cell, computed now): the stored cell, or run() -> payload dict, saved."""
        cell = self.load(name, key)
        if cell is not None:
            return cell, False
        return self.save(name, key, **run()), True


def write_atomic(path: str, text: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"  # parallel writers never share one
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
