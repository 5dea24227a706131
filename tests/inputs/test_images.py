"""catalog.inputs.images: image folders (DIR/<class>/<file>) as rows, their schema checks and inference."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from catalog.errors import AppendError
from catalog.inputs.files import InputOptions
from catalog.inputs.images import ImageFolderRows, image_features, is_image_folder, read_regular
from catalog.schema.features import Feature
from catalog.schema.inference import RowInference
from catalog.schema.model import Schema

Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install '.[test]')")

SCHEMA = Schema.from_json(
    {"features": {"image": {"dtype": "bytes"}, "label": {"dtype": "int64"}, "filename": {"dtype": "string"}}}
)


def _png(w: int = 3, h: int = 2, colour: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), colour).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for cls, names in (("dog", ["b.png", "a.png"]), ("cat", ["z.png"])):
        (tmp_path / cls).mkdir()
        for name in names:
            (tmp_path / cls / name).write_bytes(_png())
    (tmp_path / ".cache").mkdir()  # hidden: no class
    return tmp_path


def test_rows_go_class_by_class_files_sorted(folder: Path) -> None:
    rows = list(ImageFolderRows(folder, SCHEMA, None))
    assert [(i, r["label"], r["filename"]) for i, r in rows] == [
        (0, 0, "cat/z.png"),
        (1, 1, "dog/a.png"),
        (2, 1, "dog/b.png"),
    ]
    assert rows[0][1]["image"] == (folder / "cat" / "z.png").read_bytes()
    named = Schema.from_json(
        {"features": {"image": {"dtype": "bytes"}, "label": {"dtype": "int64", "names": ["dog", "cat"]}}}
    )
    assert [r["label"] for _, r in ImageFolderRows(folder, named, None)] == [1, 0, 0]  # the label's names decide


def test_decoded_images_have_exactly_the_shape_asked(folder: Path) -> None:
    tensor = Schema.from_json({"features": {"image": {"dtype": "uint8", "shape": [2, 3, 3], "encoding": "tensor"}}})
    _, row = next(iter(ImageFolderRows(folder, tensor, (2, 3, 3))))
    assert row["image"].shape == (2, 3, 3) and row["image"][0, 0].tolist() == [10, 20, 30]
    wrong = Schema.from_json({"features": {"image": {"dtype": "uint8", "shape": [3, 3, 3], "encoding": "tensor"}}})
    with pytest.raises(AppendError, match=r"z.png: 3x2 pixels, --image-shape wants 3x3 \(width x height\)$"):
        list(ImageFolderRows(folder, wrong, (3, 3, 3)))


@pytest.mark.parametrize(
    ("features", "shape", "message"),
    [
        (
            {"label": {"dtype": "int64"}},
            None,
            "an image folder fills the features image, label and filename: the schema has no 'image'",
        ),
        (
            {"image": {"dtype": "string"}},
            None,
            "feature 'image' must be a bytes scalar for encoded images, or use --image-shape H,W,C",
        ),
        (
            {"image": {"dtype": "bytes"}},
            (2, 3, 3),
            "--image-shape decodes images into uint8 tensors: feature 'image' must be one",
        ),
        (
            {"image": {"dtype": "uint8", "shape": [2, 3, 2], "encoding": "tensor"}},
            (2, 3, 2),
            "--image-shape: 2 channels; images have 1, 3 or 4",
        ),
        (
            {"image": {"dtype": "bytes"}, "extra": {"dtype": "int64"}},
            None,
            "an image folder fills image, label and filename only: feature 'extra' has no default",
        ),
    ],
)
def test_schemas_an_image_folder_cannot_fill(
    folder: Path, features: dict[str, object], shape: tuple[int, int, int] | None, message: str
) -> None:
    with pytest.raises(AppendError) as e:
        ImageFolderRows(folder, Schema.from_json({"features": features}), shape)
    assert str(e.value) == f"{folder}: {message}"


def test_files_that_are_not_what_their_names_say(folder: Path) -> None:
    (folder / "cat" / "fake.jpg").write_bytes(_png())
    with pytest.raises(AppendError, match=r"fake.jpg: not a jpg file \(its first bytes say otherwise\)$") as e:
        list(ImageFolderRows(folder, SCHEMA, None))
    assert e.value.record == 0
    (folder / "cat" / "fake.jpg").rename(folder / "cat" / "notes.txt")
    with pytest.raises(AppendError, match=r"notes.txt: not an image file \(.png, .jpg"):
        list(ImageFolderRows(folder, SCHEMA, None))
    named = Schema.from_json({"features": {"image": {"dtype": "bytes"}, "label": {"dtype": "int64", "names": ["dog"]}}})
    with pytest.raises(AppendError, match=r"class folder 'cat' is not one of the label's names \(dog\)$"):
        list(ImageFolderRows(folder, named, None))


def test_detection_inference_and_reading(folder: Path, tmp_path: Path) -> None:
    assert is_image_folder(folder)
    assert not is_image_folder(folder / "cat")  # files, not class folders
    tally = RowInference()
    feats = image_features(folder, InputOptions(), tally)
    assert feats == [
        Feature("image", "bytes", image=True, image_format="png"),
        Feature("label", "int64", names=("cat", "dog")),
        Feature("filename", "string"),
    ]
    assert read_regular(str(folder / "cat" / "z.png")) == _png()
    with pytest.raises(AppendError, match="not a regular file"):
        read_regular(str(folder / "cat"))
    with pytest.raises(AppendError, match=r"no class folders in it \(an image folder is DIR/<class>/<image file>\)$"):
        image_features(folder / "cat", InputOptions(), RowInference())
