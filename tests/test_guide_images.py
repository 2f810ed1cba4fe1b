"""The guides' pictures are rewritten only when they change visibly (tests/guide_images.py): a test run that shows
the same thing leaves the checkout clean, and a changed word is still written."""

from __future__ import annotations

from io import BytesIO

from PIL import Image, ImageDraw

from tests.guide_images import save_if_changed


def _png(text: str, shade: int = 0) -> bytes:
    image = Image.new("RGB", (320, 80), (246 + shade // 8, 245, 243))
    ImageDraw.Draw(image).text((10, 30), text, fill=(30 + shade, 30, 30))
    out = BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_the_same_picture_is_not_written_again(tmp_path):
    path = tmp_path / "view.png"
    assert save_if_changed(_png("Approve or deny"), path)
    before = path.read_bytes()
    path.write_bytes(before)
    assert not save_if_changed(_png("Approve or deny"), path)
    assert not save_if_changed(_png("Approve or deny", shade=6), path)  # a slightly different shade: not visible
    assert path.read_bytes() == before


def test_a_changed_word_or_size_is_written(tmp_path):
    path = tmp_path / "view.png"
    save_if_changed(_png("Approve or deny"), path)
    assert save_if_changed(_png("Approve or dent"), path)
    image = Image.new("RGB", (100, 80), "white")
    out = BytesIO()
    image.save(out, format="PNG")
    assert save_if_changed(out.getvalue(), path)
    with Image.open(path) as written:
        assert written.size == (100, 80)
