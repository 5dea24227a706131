"""Image folders: ``DIR/<class>/<file>`` with png, jpeg, gif, bmp or webp files, as rows of
``image`` (the file's bytes, unchanged), ``label`` (the class's index in the label feature's
``names``, else in the sorted class names) and ``filename`` (``<class>/<file>``), each filled
when the schema has it. With ``image_shape`` the images are decoded (Pillow, the optional
extra ``images``) into uint8 tensors of exactly that shape: never resized or padded."""

from __future__ import annotations

import io
import os
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from catalog.errors import AppendError
from catalog.inputs.files import InputOptions
from catalog.schema import Feature, Schema
from catalog.schema.inference import RowInference
from catalog.tfrecord.sources import open_regular

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp")
# The image_format an inferred schema records for a folder whose files all have one suffix.
_IMAGE_FORMAT = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".bmp": "bmp", ".webp": "webp"}

# What each format's files start with: a file that claims to be one and is not is refused.
_MAGIC = {
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".gif": (b"GIF87a", b"GIF89a"),
    ".bmp": (b"BM",),
    ".webp": (b"RIFF",),
}
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def read_regular(path: str) -> bytes:
    """A small regular file's bytes, in as few calls as can be (an image is read per row):
    one open that cannot block on a FIFO, one fstat that refuses anything but a file, reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        with open_regular(path):  # its message: no such file, not a regular file...
            pass
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AppendError(f"{path}: not a regular file", path)
        chunks = [os.read(fd, st.st_size + 1)]
        while chunks[-1]:  # a file that grew since fstat
            chunks.append(os.read(fd, 1 << 20))
        return b"".join(chunks)
    finally:
        os.close(fd)


def class_names(folder: Path) -> list[str]:
    return sorted(e.name for e in os.scandir(folder) if e.is_dir() and not e.name.startswith("."))


def is_image_folder(folder: Path) -> bool:
    """``DIR/<class>/<image file>``: sub-folders only (hidden entries aside), with images in them."""
    entries = [e for e in os.scandir(folder) if not e.name.startswith(".")]
    if not entries or not all(e.is_dir() for e in entries):
        return False
    return any(f.name.lower().endswith(IMAGE_SUFFIXES) for e in entries for f in os.scandir(e.path) if f.is_file())


def image_features(folder: Path, options: InputOptions, tally: RowInference) -> list[Feature]:
    """The format table's inference: an image folder's three features (``image`` with its
    format when every file has the same, ``label`` with the class names, ``filename``), which
    the tally cannot tell; its rows counted into ``tally``."""
    classes = class_names(folder)
    if not classes:
        raise AppendError(f"{folder}: no class folders in it (an image folder is DIR/<class>/<image file>)")
    formats: set[str | None] = set()
    for c in classes:
        for f in sorted((folder / c).iterdir()):
            if not f.name.startswith("."):
                formats.add(_IMAGE_FORMAT.get(f.suffix.lower()))
                tally.add({"image": b"", "label": 0, "filename": ""})
    fmt = formats.pop() if len(formats) == 1 else None
    return [
        Feature("image", "bytes", image=True, image_format=fmt),
        Feature("label", "int64", names=tuple(classes)),
        Feature("filename", "string"),
    ]


class ImageFolderRows:
    """The images of a folder of class folders, class by class, files sorted by name."""

    unit = "row"

    def __init__(self, folder: Path, schema: Schema, image_shape: tuple[int, int, int] | None) -> None:
        self.folder, self.schema, self.shape = folder, schema, image_shape
        if not folder.is_dir():  # --format images names any path; only a folder can be one
            what = "not a folder" if os.path.lexists(folder) else "no such folder"
            raise self._fail(f"{what}: an image folder is DIR/<class>/<image file>")
        feats = schema.features
        if "image" not in feats:
            raise self._fail("an image folder fills the features image, label and filename: the schema has no 'image'")
        image = feats["image"]
        if image_shape is None and not (image.dtype == "bytes" and image.is_scalar and not image.tensor):
            raise self._fail("feature 'image' must be a bytes scalar for encoded images, or use --image-shape H,W,C")
        if image_shape is not None and (not image.tensor or image.dtype != "uint8"):
            raise self._fail("--image-shape decodes images into uint8 tensors: feature 'image' must be one")
        if image_shape is not None and image_shape[2] not in _MODES:
            raise self._fail(f"--image-shape: {image_shape[2]} channels; images have 1, 3 or 4")
        unknown = set(feats) - {"image", "label", "filename"}
        required = [n for n in sorted(unknown) if not feats[n].may_be_absent]
        if required:
            raise self._fail(
                f"an image folder fills image, label and filename only: feature {required[0]!r} has no default"
            )

    def _fail(self, reason: str) -> AppendError:
        return AppendError(f"{self.folder}: {reason}", str(self.folder))

    def _labels(self, classes: list[str]) -> dict[str, int]:
        label = self.schema.features.get("label")
        names = getattr(label, "names", None) if label is not None else None
        if not names:
            return {c: i for i, c in enumerate(classes)}
        known = {n: i for i, n in enumerate(names)}
        for c in classes:
            if c not in known:
                raise self._fail(f"class folder {c!r} is not one of the label's names ({', '.join(names)})")
        return {c: known[c] for c in classes}

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        classes = class_names(self.folder)
        if not classes:
            raise self._fail("no class folders in it (an image folder is DIR/<class>/<image file>)")
        labels = self._labels(classes)
        want = self.schema.features.keys()
        index = 0
        for c in classes:
            folder = os.path.join(self.folder, c)
            for name in sorted(e.name for e in os.scandir(folder) if not e.name.startswith(".")):
                row: dict[str, Any] = {"image": self._image(os.path.join(folder, name), index)}
                if "label" in want:
                    row["label"] = labels[c]
                if "filename" in want:
                    row["filename"] = f"{c}/{name}"
                yield index, row
                index += 1

    def _image(self, path: str, index: int) -> Any:
        suffix = os.path.splitext(path)[1].lower()
        if suffix not in IMAGE_SUFFIXES:
            raise AppendError(f"{path}: not an image file ({', '.join(IMAGE_SUFFIXES)})", path, index)
        data = read_regular(path)
        if not data.startswith(_MAGIC[suffix]) or (suffix == ".webp" and data[8:12] != b"WEBP"):
            raise AppendError(f"{path}: not a {suffix[1:]} file (its first bytes say otherwise)", path, index)
        return data if self.shape is None else self._decoded(path, data, index)

    def _decoded(self, path: str, data: bytes, index: int) -> Any:
        import numpy as np

        try:
            from PIL import Image
        except ImportError as e:
            raise AppendError("--image-shape decodes images with Pillow: pip install 'tfrecord-catalog[images]'") from e
        assert self.shape is not None
        h, w, c = self.shape
        wants = f"--image-shape wants {w}x{h} (width x height)"
        try:
            with warnings.catch_warnings():
                # Pillow warns (a line on stderr) of an image past MAX_IMAGE_PIXELS: the size check
                # below bounds what is decoded to --image-shape, so its warning says nothing here.
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                img = Image.open(io.BytesIO(data))
            with img:
                if img.size != (w, h):
                    raise AppendError(f"{path}: {img.size[0]}x{img.size[1]} pixels, {wants}", path, index)
                return np.asarray(img.convert(_MODES[c]), dtype=np.uint8).reshape(h, w, c)
        except Image.DecompressionBombError as e:  # past twice MAX_IMAGE_PIXELS: Pillow opens no more
            limit = f"{2 * (Image.MAX_IMAGE_PIXELS or 0):,}"
            why = f"its header claims more pixels than Pillow decodes ({limit})"
            raise AppendError(f"{path}: {why}, {wants}", path, index) from e
        except (OSError, ValueError, EOFError, SyntaxError) as e:  # Pillow's UnidentifiedImageError is an OSError
            raise AppendError(f"{path}: cannot decode the image: {e}", path, index) from e


def image_rows(path: Path, schema: Schema, options: InputOptions, stream: IO[bytes] | None) -> ImageFolderRows:
    """The format table's reader (a folder: no stream)."""
    return ImageFolderRows(path, schema, options.image_shape)
