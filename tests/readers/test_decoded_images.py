"""Images decoded on read (``decode_images=True``, catalog/readers/images.py and tfimages.py):
the pixels ``tf.io.decode_image(data, channels, expand_animations=False)`` gives, in every reader.

The corpus (made here with Pillow and numpy, seeded): PNG (RGB, RGBA, grey, grey with alpha,
palette with and without transparency, 16-bit grey, 1-bit), GIF (plain, a transparent index,
animated: its first frame), BMP (24-bit, 32-bit with its fourth byte, 8-bit grey and palette),
JPEG (4:4:4, 4:2:2, 4:2:0, grey) and WebP (lossless RGB and RGBA, lossy). PNG, GIF, BMP and
lossless WebP equal TensorFlow's exactly; JPEG within JPEG_TOLERANCE (8 levels of 255): the max
abs diff measured on this corpus is 4 (Pillow's libjpeg and TensorFlow's round differently).
Lossy WebP is held to the same tolerance. Tests that need TensorFlow take the ``tf`` fixture.
"""

from __future__ import annotations

import io
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog
from catalog.errors import DependencyError, UsageError, ValidationError
from catalog.readers.images import JPEG_TOLERANCE, ImageDecoding, decode_image, to_channels
from catalog.schema import Feature

PIL = pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install '.[test]')")
H, W = 6, 5
LOSSY = ("jpeg", "webp_lossy")


def encoded(pixels: np.ndarray, fmt: str, mode: str | None = None, **save: Any) -> bytes:
    img = PIL.fromarray(pixels, mode) if mode else PIL.fromarray(pixels)
    out = io.BytesIO()
    img.save(out, fmt, **save)
    return out.getvalue()


def smooth(h: int, w: int, c: int, seed: int) -> np.ndarray:
    """Pixels JPEG keeps close: noise summed along rows (random noise is JPEG's worst case)."""
    steps = np.random.default_rng(seed).integers(-12, 13, (h, w, c))
    return np.clip(128 + np.cumsum(steps, axis=1), 0, 255).astype(np.uint8)


def corpus(h: int = H, w: int = W) -> dict[str, bytes]:
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    rgba = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    grey = rng.integers(0, 256, (h, w), dtype=np.uint8)
    palette = PIL.fromarray(rgb).quantize(16)
    frames = [PIL.fromarray(rgb[::-1].copy())]
    return {
        "png_rgb": encoded(rgb, "PNG"),
        "png_rgba": encoded(rgba, "PNG"),
        "png_grey": encoded(grey, "PNG"),
        "png_grey_alpha": encoded(rgba[:, :, :2].copy(), "PNG", "LA"),
        "png_palette": _saved(palette, "PNG"),
        "png_palette_clear": _saved(palette, "PNG", transparency=3),
        "png_16": encoded(grey.astype(np.uint16) * 257 + 3, "PNG"),
        "png_1bit": encoded(grey > 128, "PNG"),
        "gif": _saved(palette, "GIF"),
        "gif_clear": _saved(palette, "GIF", transparency=2),
        "gif_animated": encoded(rgb, "GIF", save_all=True, append_images=frames),
        "bmp_rgb": encoded(rgb, "BMP"),
        "bmp_32": encoded(rgba, "BMP"),
        "bmp_grey": encoded(grey, "BMP"),
        "bmp_palette": _saved(palette, "BMP"),
        "jpeg": encoded(smooth(h, w, 3, 1), "JPEG", quality=90, subsampling=0),
        "jpeg_422": encoded(smooth(h, w, 3, 2), "JPEG", quality=90, subsampling=1),
        "jpeg_420": encoded(smooth(h, w, 3, 3), "JPEG", quality=90, subsampling=2),
        "jpeg_grey": encoded(smooth(h, w, 1, 4)[:, :, 0].copy(), "JPEG", quality=90),
        "webp": encoded(rgb, "WEBP", lossless=True),
        "webp_rgba": encoded(rgba, "WEBP", lossless=True),
        "webp_lossy": encoded(smooth(h, w, 3, 5), "WEBP", quality=90),
    }


def _saved(img: Any, fmt: str, **save: Any) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **save)
    return out.getvalue()


def lossy(name: str) -> bool:
    return name.startswith(LOSSY)


IMAGE = Feature("image", "bytes", image=True)


def ours(data: bytes, channels: int | None = None) -> np.ndarray:
    return decode_image(data, IMAGE, ImageDecoding((IMAGE,), channels))


def tfs(tf: Any, data: bytes, channels: int = 0) -> np.ndarray:
    return tf.io.decode_image(data, channels=channels, expand_animations=False).numpy()


def assert_same_pixels(name: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == np.uint8 and got.shape == want.shape, (name, got.shape, want.shape)
    diff = int(np.abs(got.astype(int) - want.astype(int)).max()) if got.size else 0
    assert diff <= (JPEG_TOLERANCE if lossy(name) else 0), (name, diff)


# --------------------------------------------------------------------------- the pixels


@pytest.mark.parametrize("name", sorted(corpus()))
def test_pixels_equal_tensorflows(tf: Any, name: str) -> None:
    data = corpus()[name]
    assert_same_pixels(name, ours(data), tfs(tf, data))


def test_jpeg_tolerance_is_what_is_measured(tf: Any) -> None:
    """The documented tolerance holds on this corpus, and is not far above what is measured."""
    diffs = [np.abs(ours(d).astype(int) - tfs(tf, d).astype(int)).max() for n, d in corpus(48, 64).items() if lossy(n)]
    assert 0 < max(diffs) <= JPEG_TOLERANCE, diffs


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("name", sorted(corpus()))
def test_channels_as_tensorflow_converts(tf: Any, name: str, channels: int) -> None:
    """Where TensorFlow's decoder converts to ``channels`` itself (it refuses GIF to 1 or 4,
    BMP to 1, JPEG to 4, WebP to 1...), the same pixels; everywhere, the graph's conversion
    (tfimages.to_channels over decode_image) equals the other readers' exactly."""
    from catalog.readers import tfimages

    data = corpus()[name]
    got = ours(data, channels)
    graph = tfimages.to_channels(tf, tf.io.decode_image(data, expand_animations=False), channels).numpy()
    assert_same_pixels(name, got, graph)
    try:
        direct = tfs(tf, data, channels)
    except tf.errors.InvalidArgumentError:
        return
    if not name.startswith("jpeg_grey") and channels == 1 and name.startswith("jpeg"):
        return  # libjpeg's own grey (Y of YCbCr) is not RGB's: no promise made
    if name in ("png_1bit", "png_palette") and channels == 4:
        # TensorFlow's alpha for a PNG under 8 bits a pixel is libpng's filler at that depth (1,
        # 15): not opaque. Ours is 255, as for every other file without alpha.
        assert (direct[:, :, 3] < 255).all() and (got[:, :, 3] == 255).all()
        direct = direct[:, :, :3]
        got = got[:, :, :3]
    assert_same_pixels(name, got, direct)


def test_three_channels_decoded_directly_as_to_channels_converts(tf: Any) -> None:
    """tf_dataset asks decode_image for 3 channels itself (no conversion ops a record): every
    format's decoder gives them, the very pixels of decoding as stored then to_channels; but
    WebP's, which refuses RGBA (so tf_dataset converts a WebP's pixels itself)."""
    from catalog.readers import tfimages

    for name, data in corpus().items():
        stored = tfimages.to_channels(tf, tf.io.decode_image(data, expand_animations=False), 3).numpy()
        if name == "webp_rgba":
            with pytest.raises(tf.errors.InvalidArgumentError, match="Number of channels"):
                tfs(tf, data, 3)
        else:
            assert np.array_equal(tfs(tf, data, 3), stored), name


def test_tf_dataset_every_format_to_three_channels(tf: Any, tmp_path: Path) -> None:
    """Every format of the corpus through tf_dataset with 3 channels (the schema's), RGBA WebP
    among them: the other readers' pixels."""
    ds = Catalog.init(tmp_path / "c").register("all", FIXED)
    images = corpus()
    ds.append_rows([{"image": images[name], "id": i} for i, name in enumerate(sorted(images))])
    got = np.concatenate([b["image"].numpy() for b in ds.tf_dataset(4, decode_images=True)])
    for name, pixels in zip(sorted(images), got, strict=True):
        assert_same_pixels(name, pixels, ours(images[name], 3))


def header_cases() -> dict[str, tuple[bytes, tuple[int, int]]]:
    """Files and the (width, height) their headers declare: the corpus, a WebP of the extended
    layout (VP8X), a BMP stored top down (its height negative), a file of no format, an empty one."""
    cases = {name: (data, (W, H)) for name, data in corpus().items()}
    rgba = smooth(H, W, 4, 6)
    cases["webp_extended"] = (encoded(rgba, "WEBP", quality=90), (W, H))  # lossy with alpha: VP8X
    assert cases["webp_extended"][0][12:16] == b"VP8X"
    bmp = bytearray(corpus()["bmp_rgb"])
    bmp[22:26] = struct.pack("<i", -H)
    cases["bmp_top_down"] = (bytes(bmp), (W, H))
    cases["none"] = (b"not an image at all", (0, 0))
    cases["empty"] = (b"", (0, 0))
    return cases


@pytest.mark.parametrize("name", sorted(header_cases()))
def test_header_size_of_every_format(tf: Any, name: str) -> None:
    from catalog.readers import tfimages

    data, size = header_cases()[name]
    assert tuple(int(v) for v in tfimages.header_size(tf, tf.constant(data))) == size


def test_header_size_has_no_branch_and_is_traced_once(tf: Any) -> None:
    """Each record's header is read by a few ops, no tf.cond or tf.case (a function call a
    record each), and traced once a process, not once a pipeline."""
    from catalog.readers import tfimages

    for data in (b"a", b"b"):
        tfimages.header_size(tf, tf.constant(data))
    traced = tfimages._TRACED["header_size"]
    assert traced.experimental_get_tracing_count() == 1
    ops = {op.type for op in traced.get_concrete_function().graph.get_operations()}
    assert not ops & {"If", "StatelessIf", "Case", "StatelessCase", "While", "StatelessWhile"}, ops


def test_to_channels_rules() -> None:
    rgba = np.array([[[10, 20, 30, 40]]], np.uint8)
    assert to_channels(rgba, 3).tolist() == [[[10, 20, 30]]]
    assert to_channels(rgba, 1).tolist() == [[[(9797 * 10 + 19234 * 20 + 3737 * 30) >> 15]]]
    grey_alpha = np.array([[[7, 99]]], np.uint8)
    assert to_channels(grey_alpha, 4).tolist() == [[[7, 7, 7, 99]]]
    assert to_channels(grey_alpha, 1).tolist() == [[[7]]]
    assert to_channels(np.array([[[7]]], np.uint8), 4).tolist() == [[[7, 7, 7, 255]]]


# --------------------------------------------------------------------------- the readers


FIXED = {"features": {"image": {"dtype": "bytes", "encoding": "image", "shape": [H, W, 3]}, "id": {"dtype": "int64"}}}
RAGGED = {"features": {"image": {"dtype": "bytes", "encoding": "image"}, "id": {"dtype": "int64"}}}
FORMATS = ["png_rgb", "png_grey", "gif", "bmp_rgb", "jpeg", "webp", "png_rgba", "bmp_32"]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """ "fixed": images of every format, HxW fixed and 3 channels; "ragged": sizes and channels vary."""
    cat = Catalog.init(tmp_path_factory.mktemp("images") / "c")
    fixed = cat.register("fixed", FIXED)
    images = corpus()
    for part in (FORMATS[:4], FORMATS[4:]):  # two shards
        fixed.append_rows([{"image": images[n], "id": FORMATS.index(n)} for n in part])
    ragged = cat.register("ragged", RAGGED)
    ragged.append_rows([{"image": corpus(3 + i, 2 + 2 * i)[n], "id": i} for i, n in enumerate(FORMATS)])
    return cat


def expected(cat: Catalog, name: str, channels: int | None = None) -> list[np.ndarray]:
    """Each record's image decoded on its own, in dataset order."""
    return [ours(r["image"], channels if channels or name == "ragged" else 3) for r in cat.dataset(name).read()]


def test_default_keeps_the_bytes(catalog: Catalog) -> None:
    ds = catalog.dataset("fixed")
    assert all(isinstance(r["image"], bytes) for r in ds.read())
    assert next(ds.batches(3))["image"].dtype == object
    assert isinstance(ds.source()[0]["image"], bytes)


def test_read_rows(catalog: Catalog) -> None:
    for name in ("fixed", "ragged"):
        got = [r["image"] for r in catalog.dataset(name).read(decode_images=True)]
        assert [g.shape for g in got] == [e.shape for e in expected(catalog, name)]
        assert all(np.array_equal(g, e) for g, e in zip(got, expected(catalog, name), strict=True))


def test_batches_fixed_shape_is_one_array(catalog: Catalog) -> None:
    got = list(catalog.dataset("fixed").batches(3, decode_images=True))
    assert [b["image"].shape for b in got] == [(3, H, W, 3), (3, H, W, 3), (2, H, W, 3)]
    assert got[0]["image"].dtype == np.uint8
    assert np.array_equal(np.concatenate([b["image"] for b in got]), np.stack(expected(catalog, "fixed")))


def test_batches_ragged_are_arrays_per_row(catalog: Catalog) -> None:
    got = list(catalog.dataset("ragged").batches(5, decode_images=True, shuffle=True, seed=3))
    column = np.concatenate([b["image"] for b in got])
    ids = np.concatenate([b["id"] for b in got])
    assert column.dtype == object and len(column) == len(FORMATS)
    want = expected(catalog, "ragged")
    assert all(np.array_equal(column[k], want[i]) for k, i in enumerate(ids.tolist()))
    assert {column[k].shape[:2] for k in range(len(column))} == {(3 + i, 2 + 2 * i) for i in range(len(FORMATS))}


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_channels_forced(catalog: Catalog, channels: int) -> None:
    got = next(catalog.dataset("fixed").batches(8, decode_images=True, channels=channels))["image"]
    assert got.shape == (8, H, W, channels)
    assert np.array_equal(got, np.stack(expected(catalog, "fixed", channels)))
    ragged = list(catalog.dataset("ragged").read(decode_images=True, channels=channels))
    assert {r["image"].shape[2] for r in ragged} == {channels}


def test_source_rows_and_batches(catalog: Catalog) -> None:
    src = catalog.dataset("fixed").source(decode_images=True)
    want = expected(catalog, "fixed")
    assert np.array_equal(src[5]["image"], want[5])
    assert np.array_equal(src[[7, 0]]["image"], np.stack([want[7], want[0]]))
    assert [np.array_equal(r["image"], want[i]) for i, r in zip([2, 3], src.__getitems__([2, 3]), strict=True)] == [
        True,
        True,
    ]


def test_torch_two_workers_decode_in_the_workers(catalog: Catalog) -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install '.[test]')")
    from torch.utils.data import DataLoader

    ds = catalog.dataset("fixed").torch(batch_size=2, decode_images=True)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    got = {int(i): img for b in loader for i, img in zip(b["id"], b["image"], strict=True)}
    assert isinstance(next(iter(loader))["image"], torch.Tensor)
    want = expected(catalog, "fixed")
    assert sorted(got) == list(range(len(FORMATS)))
    assert all(np.array_equal(got[i].numpy(), want[[FORMATS.index(n) for n in FORMATS].index(i)]) for i in got)
    rows = DataLoader(catalog.dataset("ragged").torch(decode_images=True, channels=1), batch_size=None, num_workers=2)
    assert sorted(tuple(r["image"].shape) for r in rows) == sorted((3 + i, 2 + 2 * i, 1) for i in range(len(FORMATS)))


def test_tf_dataset_static_shapes_for_model_fit(tf: Any, catalog: Catalog) -> None:
    ds = catalog.dataset("fixed")
    pipeline = ds.tf_dataset(3, decode_images=True, label_key="id")
    assert pipeline.element_spec[0]["image"].shape.as_list() == [None, H, W, 3]
    got = np.concatenate([f["image"].numpy() for f, _label in pipeline])
    for name, g, e in zip(FORMATS, got, expected(catalog, "fixed"), strict=True):
        assert_same_pixels(name, g, e)
    model = tf.keras.Sequential(
        [tf.keras.layers.Rescaling(1 / 255), tf.keras.layers.Flatten(), tf.keras.layers.Dense(8)]
    )
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    images_only = pipeline.map(lambda f, label: (f["image"], label))
    assert len(model.fit(images_only, epochs=1, verbose=0, shuffle=False).history["loss"]) == 1


def test_tf_dataset_ragged_and_channels(tf: Any, catalog: Catalog) -> None:
    pipeline = catalog.dataset("ragged").tf_dataset(8, decode_images=True, channels=4)
    assert pipeline.element_spec["image"].shape.as_list() == [None, None, None, 4]
    batch = next(iter(pipeline))["image"]
    for name, g, e in zip(FORMATS, batch, expected(catalog, "ragged", 4), strict=True):
        assert_same_pixels(name, g.numpy(), e)


def test_tf_dataset_images_with_their_own_channels_in_one_batch(tf: Any, tmp_path: Path) -> None:
    """Without ``channels`` or channels in the schema each file keeps its own: a grey and a
    colour image batch as ``[n, (H), (W), (C)]`` (it failed in TensorFlow, "All flat_values
    must have compatible shapes"), with the pixels the other readers give."""
    grey, rgb = encoded(smooth(3, 4, 1, 1)[..., 0], "PNG", "L"), encoded(smooth(2, 5, 3, 2), "PNG")
    ds = Catalog.init(tmp_path / "cat").register(
        "mixed", {"features": {"image": {"dtype": "bytes", "encoding": "image"}}}
    )
    ds.append_rows([{"image": grey}, {"image": rgb}, {"image": grey}])
    want = list(next(ds.batches(3, decode_images=True))["image"])
    assert [w.shape for w in want] == [(3, 4, 1), (2, 5, 3), (3, 4, 1)]
    for optional in (False, True):
        if optional:  # an optional image feature is decoded in the batch: the same rule there
            ds = ds.catalog.register(
                "mixed-optional", {"features": {"image": {"dtype": "bytes", "encoding": "image", "optional": True}}}
            )
            ds.append_rows([{"image": grey}, {"image": rgb}, {"image": grey}])
        batch = next(iter(ds.tf_dataset(3, decode_images=True)))["image"]
        got = [(g[0] if optional else g).numpy() for g in batch]
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w)


# --------------------------------------------------------------------------- refusals


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height RGB pixels, with one row of data (a bomb's header)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * (1 + 3 * width)))
        + chunk(b"IEND", b"")
    )


def bad_dataset(root: Path, image: bytes, schema: dict[str, Any] = RAGGED) -> Any:
    """Dataset "bad": two good images, then ``image`` (record 2 of its one shard)."""
    cat = Catalog.init(root / "c")
    ds = cat.register("bad", schema)
    good = corpus()["png_rgb"]
    ds.append_rows([{"image": good, "id": 0}, {"image": good, "id": 1}, {"image": image, "id": 2}])
    return ds


def shard_of(ds: Any) -> str:
    """The path the readers name the dataset's one shard by."""
    return str(ds.source().plan.shards[0].path)


def refused(ds: Any, **kw: Any) -> list[str]:
    """The error every reader gives (the same line), read with decode_images=True."""
    lines = []
    for read in (
        lambda: list(ds.read(decode_images=True, **kw)),
        lambda: list(ds.batches(2, decode_images=True, **kw)),
        lambda: ds.source(decode_images=True, **kw)[2],
        lambda: ds.source(decode_images=True, **kw)[[0, 2]],
    ):
        with pytest.raises(ValidationError) as info:
            read()
        lines.append(str(info.value))
        assert (info.value.feature, info.value.record) == ("image", 2)
    return lines


@pytest.mark.filterwarnings("error::PIL.Image.DecompressionBombWarning")  # a line on stderr
@pytest.mark.parametrize(
    ("width", "claim"),
    [
        (10000, "10000x10000"),  # past MAX_IMAGE_PIXELS: Pillow warns and would decode 300 MB
        (30000, "more than 178,956,970"),  # past twice: Pillow's DecompressionBombError, a traceback
    ],
)
def test_a_bomb_is_one_line_naming_shard_record_feature(tmp_path: Path, width: int, claim: str) -> None:
    ds = bad_dataset(tmp_path, png_claiming(width, width))
    shard = shard_of(ds)
    limit = "PIL.Image.MAX_IMAGE_PIXELS (89,478,485)"
    said = f"its header claims {claim} pixels, past {limit}: not decoded (a decompression bomb?)"
    started = time.monotonic()
    assert set(refused(ds)) == {f"{shard}: record 2: feature 'image': {said}"}
    assert time.monotonic() - started < 5  # the header alone was read


def test_a_bomb_in_the_graph(tf: Any, tmp_path: Path) -> None:
    ds = bad_dataset(tmp_path, png_claiming(10000, 10000))
    with pytest.raises(tf.errors.InvalidArgumentError, match="header claims more than 89,478,485 pixels"):
        list(ds.tf_dataset(3, decode_images=True))


@pytest.mark.parametrize(
    ("image", "said"),
    [
        (b"not an image at all", "not a png, jpeg, gif, bmp or webp image (its first bytes: 6e6f7420616e2069)"),
        (corpus()["png_rgb"][:60], "a corrupt png image ("),
    ],
)
def test_a_corrupt_image_is_one_line(tmp_path: Path, image: bytes, said: str) -> None:
    ds = bad_dataset(tmp_path, image)
    lines = refused(ds)
    assert len(set(lines)) == 1 and "\n" not in lines[0]
    assert lines[0].startswith(f"{shard_of(ds)}: record 2: feature 'image': {said}"), lines[0]


def test_an_image_of_another_size_than_the_schemas(tf: Any, tmp_path: Path) -> None:
    ds = bad_dataset(tmp_path, corpus(H + 1, W)["png_rgb"], FIXED)
    said = f"{H + 1}x{W} pixels (height x width), the schema's shape is [{H}, {W}, 3]"
    assert set(refused(ds)) == {f"{shard_of(ds)}: record 2: feature 'image': {said}"}
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"feature ..image..: an image of another size than the schema..s \[6, 5, 3\]",
    ):
        list(ds.tf_dataset(3, decode_images=True))


def test_arguments_checked(catalog: Catalog) -> None:
    ds = catalog.dataset("fixed")
    with pytest.raises(UsageError, match="channels is 1, 3 or 4"):
        ds.batches(2, decode_images=True, channels=2)
    with pytest.raises(UsageError, match="give decode_images=True with it"):
        ds.read(channels=3)
    with pytest.raises(UsageError, match="decode_images is True or False"):
        ds.source(decode_images="yes")  # type: ignore[arg-type]


def test_without_pillow_one_line(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(DependencyError) as info:
        next(catalog.dataset("fixed").read(decode_images=True))
    assert str(info.value).endswith(": pip install 'tfrecord-catalog[images]'")
    assert str(info.value).startswith("decode_images=True decodes images with Pillow (")
