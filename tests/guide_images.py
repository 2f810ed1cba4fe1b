"""The guides' pictures (docs/images/), taken by the UI tests, and written only when they change visibly.

A test run must leave the checkout as it found it: each picture shows fixed stand-ins for what differs from run to
run (pytest's temporary folders, the ports the test servers took, what this machine happens to run on the usual
model ports), and a picture is written only when its decoded pixels differ visibly from the file already there, so
a renderer's anti-aliasing or the 64-colour palette settling on a slightly different shade rewrites nothing.
"""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

GUIDE_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"

# A pixel counts as changed when one of its channels moved by more than this (palette drift stays under it) ...
CHANNEL_TOLERANCE = 64
# ... and a picture as changed when more pixels than this changed: one different character is a few tens of pixels.
CHANGED_PIXELS = 12

# Replaces each key by its value in every text node, input value and placeholder, then removes the elements the
# selectors name: the page then shows the same words whoever runs the test, wherever and on whichever ports.
_FIX_PAGE = """([pairs, hide]) => {
  const fix = (s) => pairs.reduce((out, [from, to]) => out.split(from).join(to), s);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) node.nodeValue = fix(node.nodeValue);
  for (const el of document.querySelectorAll("input, textarea")) {
    el.value = fix(el.value);
    if (el.placeholder) el.placeholder = fix(el.placeholder);
  }
  for (const sel of hide) for (const el of document.querySelectorAll(sel)) el.remove();
}"""


def fix_page(page, replacements: dict[str, str], hide: tuple[str, ...] = ()) -> None:
    """Show `replacements`' values in place of their keys (longest first: a folder before its parent)."""
    pairs = sorted(((k, v) for k, v in replacements.items() if k), key=lambda kv: -len(kv[0]))
    page.evaluate(_FIX_PAGE, [pairs, list(hide)])


def render(png: bytes):
    """The picture as stored: RGB in 64 colours (a few tens of KB, not a few hundred)."""
    from PIL import Image

    return Image.open(BytesIO(png)).convert("RGB").quantize(colors=64)


def changed_pixels(new, path: Path) -> int | None:
    """How many pixels of `new` differ visibly from the picture at `path` (None: no comparable picture there)."""
    from PIL import Image, ImageChops

    if not path.exists():
        return None
    with Image.open(path) as old_file:
        old = old_file.convert("RGB")
    new = new.convert("RGB")
    if old.size != new.size:
        return None
    red, green, blue = ImageChops.difference(old, new).split()
    largest = ImageChops.lighter(ImageChops.lighter(red, green), blue)
    return sum(largest.histogram()[CHANNEL_TOLERANCE + 1:])


def save_if_changed(png: bytes, path: Path) -> bool:
    """Write the screenshot `png` to `path` unless the picture there already looks the same; True when written."""
    image = render(png)
    changed = changed_pixels(image, path)
    if changed is not None and changed <= CHANGED_PIXELS:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)
    return True
