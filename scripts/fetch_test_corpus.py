"""Fetch the real-world test data into .cache/corpus (git-ignored): `make test` runs this before the tests.

No one on this project wrote this data, and none of it is committed. It comes from the package registry, by
pinned version and sha256, through pip (so the registry the machine is configured with is used):
- pdf/: pypdf's own test resources (real PDFs of many producers and defects, every encryption revision), from
  its source distribution's `resources/` (BSD licence, kept beside them as LICENSE.pypdf);
- youtube/: recorded YouTube responses from youtube-transcript-api's `test/assets/` (MIT licence), which let the
  real library fetch and parse transcripts with no network.

Usage: python scripts/fetch_test_corpus.py [DEST]   (DEST defaults to .cache/corpus in the checkout)
Prints nothing when the corpus is already there; exits non-zero with what went wrong otherwise.
"""

from __future__ import annotations

import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import registry_data  # noqa: E402  (a sibling script: the folder is on the path only from the line above)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / ".cache" / "corpus"

# (distribution, version, sha256 of the sdist, folder inside it, where it goes, the licence file to keep, the
# file names to take: pypdf's resources also hold the texts and images its own tests compare against)
SOURCES = [
    ("pypdf", "7.1.1", "2eff4e2fc5fb22a6d6711e6f1166cdc9ab5765d90cd0d77dfea3f4aa91a27b1d",
     "resources", "pdf", "LICENSE", (".pdf",)),
    ("youtube_transcript_api", "1.2.5", "5e750bd1bac188c1b4afeaf20464ba4dd7a5fb05617f48463f9faa5bace683cc",
     "youtube_transcript_api/test/assets", "youtube", "LICENSE", (".static",)),
]
STAMP = ".complete"


def extract(sdist: Path, folder: str, licence: str, suffixes: tuple[str, ...], dest: Path) -> int:
    """Copy `folder` (and the licence) out of the sdist into `dest`; refuses members that leave it."""
    count = 0
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        prefix = f"{top}/{folder}/"
        for member in tar.getmembers():
            if not member.isfile():
                continue
            if member.name.startswith(prefix) and member.name.endswith(suffixes):
                rel = Path(member.name[len(prefix):])
            elif member.name == f"{top}/{licence}":
                rel = Path(f"LICENSE.{sdist.name.split('-')[0]}")
            else:
                continue
            if rel.is_absolute() or ".." in rel.parts:
                raise SystemExit(f"{sdist.name}: refusing the member {member.name}")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src, target.open("wb") as out:  # type: ignore[union-attr]
                shutil.copyfileobj(src, out)
            count += 1
    return count


def main(argv: list[str]) -> None:
    dest = Path(argv[1]) if len(argv) > 1 else DEFAULT_DEST
    if (dest / STAMP).exists():
        return
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jarvis-corpus-") as tmp:
        for name, version, want, folder, where, licence, suffixes in SOURCES:
            # pip prepares an sdist's metadata with its build backend (fetched into an isolated environment)
            sdist = registry_data.check(registry_data.pip_download(name, version, Path(tmp), sdist=True), want)
            target = dest / where
            shutil.rmtree(target, ignore_errors=True)
            count = extract(sdist, folder, licence, suffixes, target)
            print(f"test corpus: {count} files from {name} {version} in {target}")
    (dest / STAMP).write_text("\n".join(f"{n}=={v} {h}" for n, v, h, *_ in SOURCES) + "\n")


if __name__ == "__main__":
    main(sys.argv)
