"""README.md's examples run (issue 30, item 4): every fenced code block is run here, or is
marked ``<!-- not run: REASON -->`` in the README's source, so an example can never again be
false. Each README section runs in one directory, on one catalog (tests/readme_blocks.py
says how a block runs and what the hidden setup may do)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from readme_blocks import Block, Section, cli_env, parse, readme_blocks

from catalog import RecordWriter, Schema, encode_example

# Sections whose blocks run, each by the test named after it; any other block must be marked.
RUN_SECTIONS = {
    "CLI": "test_cli_section",
    "Python API": "test_python_api_section",
    "Images decoded on read": "test_images_decoded_on_read_section",
    "Running at scale": "test_running_at_scale_section",
}
MOST_NOT_RUN = 4


def section_blocks(name: str) -> list[Block]:
    blocks = [b for b in readme_blocks() if b.section == name and b.not_run is None]
    assert blocks, f"README.md has no block to run under {name!r} (renamed?)"
    return blocks


def test_every_block_is_run_or_says_why_not() -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 10  # (fewer as pages are rewritten to make their own inputs, run by Sybil)
    unclaimed = [f"README.md:{b.line} ({b.section})" for b in blocks if not b.not_run and b.section not in RUN_SECTIONS]
    assert not unclaimed, f"blocks no test runs; run them or mark them <!-- not run: REASON -->: {unclaimed}"
    langs = {b.lang for b in blocks if not b.not_run}
    assert langs <= {"sh", "python", "json", ""}, langs
    marked = [b for b in blocks if b.not_run]
    assert len(marked) <= MOST_NOT_RUN, [(b.line, b.not_run) for b in marked]


def test_the_collector_finds_blocks_sections_and_markers() -> None:
    text = (
        "# T\n\n## One\n\n```sh\ncatalog list\n```\n\n### Two\n\n<!-- not run: needs a GPU -->\n"
        "```python\nimport x\n```\n\n- item:\n\n  ```\n  error: x\n  ```\n"
    )
    blocks = parse(text)
    assert [(b.line, b.lang, b.section, b.not_run) for b in blocks] == [
        (6, "sh", "One", None),
        (13, "python", "Two", "needs a GPU"),
        (19, "", "Two", None),
    ]
    assert blocks[2].code == "error: x\n"


def test_a_failing_line_is_named_by_its_readme_line(tmp_path: Path) -> None:
    section = Section(tmp_path, cli_env(tmp_path))
    block = Block(40, "sh", "catalog init c   # a comment\n\ncatalog -C c show nothing\n", "CLI", None)
    with pytest.raises(AssertionError, match=r"README.md:42: exit 1: catalog -C c show nothing"):
        section.run([block])


# --------------------------------------------------------------------------- inputs


def write_records(path: Path, records: list[bytes], compression: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with RecordWriter(path, compression) as w:
        for record in records:
            w.write(record)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_images(folder: Path, shape: tuple[int, int, int] = (4, 4, 3)) -> None:
    """An image folder: DIR/<class>/<file>.png, two classes."""
    import numpy as np
    from PIL import Image

    for i, label in enumerate(["cat", "dog", "cat"]):
        (folder / label).mkdir(parents=True, exist_ok=True)
        pixels = np.full(shape, 40 * i, dtype=np.uint8)
        Image.fromarray(pixels).save(folder / label / f"{i}.png")


CLI_SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64", "default": 0},
        "text": {"dtype": "string", "default": ""},
        "label": {"dtype": "int64", "names": ["cat", "dog"], "default": 0},
        "image": {"dtype": "bytes", "encoding": "image", "format": "png", "optional": True},
        "filename": {"dtype": "string", "optional": True},
    }
}


def rows(start: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"record {i}", "label": i % 2} for i in range(start, start + n)]


def cli_inputs(here: Path) -> None:
    """What the CLI tour names, made in its catalog directory (`cd cat`)."""
    here.mkdir(parents=True)
    (here / "schema.json").write_text(json.dumps(CLI_SCHEMA))
    schema = Schema.from_json(CLI_SCHEMA)
    encode = schema.encode
    write_records(here / "part1.tfrecord", [encode(r) for r in rows(0, 40)])
    write_records(here / "part2.tfrecord.gz", [encode(r) for r in rows(40, 40)], "gzip")
    write_jsonl(here / "rows.jsonl", rows(80, 20))
    write_records(here / "test.tfrecord", [encode(r) for r in rows(100, 20)])
    write_records(here / "some.tfrecord", [encode_example({"x": [1.0, 2.0], "name": "a"})] * 3)
    write_csv(here / "sales" / "jan.csv", [{"region": "north", "amount": 1.5}, {"region": "south", "amount": 2}])
    write_csv(here / "sales" / "feb.csv", [{"region": "east", "amount": 3.25}])
    write_csv(here / "rows.csv", rows(120, 10))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows(130, 10)), here / "table.parquet")
    write_images(here / "images")
    # new data of the distribution of the train split at that line (ids 0-99, after the restore): `--check` passes
    write_jsonl(here / "new.jsonl", [{"id": i, "text": f"record {i}", "label": i % 2} for i in range(2, 100, 5)])
    write_jsonl(here / "val.jsonl", rows(160, 20))
    # the error lines the README shows: a record whose id is a float; a data CRC flipped
    records = [encode(r) for r in rows(0, 3)] + [encode_example({"id": 1.5, "text": "x", "label": 0})]
    write_records(here / "in" / "bad.tfrecord", records)


def tfx_examples(folder: Path) -> None:
    """A TFX-like output folder of gzip TFRecord files (adopt infers their schema)."""
    for part in range(2):
        records = [encode_example({"id": i, "text": f"log {i}"}) for i in range(part * 10, part * 10 + 10)]
        write_records(folder / f"data_tfrecord-0000{part}-of-00002.gz", records, "gzip")


def corrupt_at(path: Path, offset: int) -> None:
    """Records of one size, one of them starting at ``offset``, whose data gets a bit flipped."""
    size = next(k for k in range(1, 100) if offset % (16 + len(encode_example({"id": 1, "text": "y" * k}))) == 0)
    records = [encode_example({"id": i % 10, "text": "y" * size}) for i in range(8)]
    write_records(path, records)
    data = bytearray(path.read_bytes())
    data[offset + 12] ^= 1
    path.write_bytes(bytes(data))


@pytest.fixture
def psql_table(pg_server: Any, pg_url: str) -> dict[str, str]:
    """`psql` reaches table t (the tour's rows) through the standard PG* variables."""
    import sqlalchemy as sa

    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id bigint, text text, label bigint)")
        for r in rows(200, 5):
            conn.execute(sa.text("INSERT INTO t VALUES (:id, :text, :label)"), r)
    engine.dispose()
    database = pg_url.rsplit("/", 1)[1]
    return {"PGHOST": "127.0.0.1", "PGPORT": str(pg_server.port), "PGUSER": "postgres", "PGDATABASE": database}


def serve_briefly(command: str) -> str:
    """`catalog serve` runs until stopped: in the background on a free port, until its
    first page answers."""
    from servers import free_port

    port = free_port()
    probe = (
        "import sys, time, urllib.request\n"
        "for _ in range(300):\n"
        "    try:\n"
        f"        sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:{port}/').status == 200 else 1)\n"
        "    except OSError:\n"
        "        time.sleep(0.1)\n"
        "sys.exit(1)\n"
    )
    return f'{command} --port {port} & __serve=$!\npython -c "{probe}"\nkill $__serve; wait $__serve || true'


# --------------------------------------------------------------------------- the sections


def test_cli_section(tmp_path: Path, psql_table: dict[str, str]) -> None:
    cli_inputs(tmp_path / "cat")
    tfx_examples(tmp_path / "tfx" / "examples")
    from tests.ops.test_adopt_adversarial import build_toy_tfds

    build_toy_tfds(tmp_path / "tensorflow_datasets" / "mnist" / "3.0.1")
    corrupt_at(tmp_path / "errors" / "data" / "bad.tfrecord", 180)
    section = Section(
        tmp_path,
        {**cli_env(tmp_path), **psql_table},
        before={
            # a new migration is a template: its example AddField is commented out
            "catalog migrate demo --dry-run": "sed -i 's/# AddField/AddField/' migrations/demo/0001_add_height.py",
            "catalog stats demo --split validation": "catalog append demo val.jsonl --split validation > /dev/null",
            # the function the map names, in the working directory (README's comment says its shape)
            "catalog map demo lens": 'printf \'def add_length(row):\\n    return {"id": row["id"], '
            '"length": len(row["text"])}\\n\' > features.py',
            "catalog refresh dogs": "catalog append demo rows.jsonl --allow-duplicate > /dev/null",
        },
        instead={"catalog serve": serve_briefly("catalog serve")},
        swap={"/data/tfx/examples/": f"{tmp_path}/tfx/examples/"},
    )
    blocks = section_blocks("CLI")
    section.outputs = {
        blocks[1].line: [
            "catalog append demo in/bad.tfrecord",
            f"cd {tmp_path}/errors && catalog inspect data/bad.tfrecord",
            "catalog cat dmeo",
        ]
    }
    assert section.run(blocks) == 2


PY_SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64", "default": 0},
        "text": {"dtype": "string", "default": ""},
        "label": {"dtype": "int64", "names": ["cat", "dog"], "default": 0},
        "image": {"dtype": "uint8", "shape": [32, 32, 3], "encoding": "tensor", "default": 0},
        "filename": {"dtype": "string", "default": ""},
    }
}
MIGRATIONS = {
    "0001_add_source.py": 'operations = [AddField("source", {"dtype": "string"}, default="readme")]\n',
    "0002_add_weight.py": 'operations = [AddField("weight", {"dtype": "float32"}, default=1.0)]\n',
}


def same_rows(n: int) -> list[dict[str, Any]]:
    """Rows of one distribution however many: appends of them never drift (`check="fail"`)."""
    return [{"id": i % 10, "text": f"record {i % 10}", "label": i % 2} for i in range(n)]


def python_inputs(here: Path) -> None:
    """What the Python API block names, in its working directory."""
    import pandas as pd

    (here / "schema.json").write_text(json.dumps(PY_SCHEMA))
    encode = Schema.from_json(PY_SCHEMA).encode
    pd.DataFrame(same_rows(40)).to_csv(here / "big.csv", index=False)
    pd.DataFrame(same_rows(20)).to_csv(here / "rows.csv", index=False, sep=";")
    pd.DataFrame(same_rows(30)).to_parquet(here / "t.parquet")
    write_images(here / "images", (32, 32, 3))
    write_records(here / "again.tfrecord", [encode(r) for r in same_rows(20)])
    write_records(here / "part1.tfrecord", [encode(r) for r in same_rows(60)])
    write_jsonl(here / "rows.jsonl", same_rows(10))
    write_csv(here / "data" / "jan.csv", [{"region": "north", "amount": 1.5}, {"region": "south", "amount": 2}])
    for part in range(2):
        write_records(here / "tfx" / f"part-{part}.gz", [encode(r) for r in same_rows(10 + part)], "gzip")
    for name, ops in MIGRATIONS.items():
        (here / "migrations" / "demo").mkdir(parents=True, exist_ok=True)
        (here / "migrations" / "demo" / name).write_text("from catalog.migrate import AddField\n\n" + ops)


def keras_model(tf: Any) -> Any:
    """The reader's model: a linear map of the image to the label."""

    class Model(tf.keras.Model):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.dense = tf.keras.layers.Dense(1)

        def call(self, features: dict[str, Any]) -> Any:
            return self.dense(tf.reshape(tf.cast(features["image"], "float32") / 255.0, [-1, 32 * 32 * 3]))

    model = Model()
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_python_api_section(tmp_path: Path, pg_url: str, tf: Any) -> None:
    import pandas as pd
    import torch

    python_inputs(tmp_path)
    program = {
        "pd": pd, "torch": torch, "rows": same_rows(50), "df": pd.DataFrame(same_rows(70)),
        "test_rows": same_rows(20), "row": same_rows(1)[0], "model": keras_model(tf),
        "strategy": tf.distribute.get_strategy(), "i": 5, "first_epoch": 0, "epochs": 1,
        "checkpoint": {"epoch": 0, "samples": 64},
        "SALES": {"features": {"price": {"dtype": "float32", "default": -1.0}}}, "SALE": [{"price": 2.5}],
        # rows of the schema after the README's migrations (text renamed caption, height added)
        "new_rows": [{"id": 1, "caption": "a", "label": 0, "height": 2}],
    }  # fmt: skip
    section = Section(
        tmp_path,
        cli_env(tmp_path),
        before={
            'ds.compare_stats("train", "validation")': 'ds.append_rows(rows, split="validation")',
            # the training program's epoch, rank and world size (`w` was the writer above)
            "world_size=w)": "e, r, w = 0, 1, 2",
            'ds = Catalog.open("my-catalog")': 'Catalog.init("my-catalog").register("sales", SALES).append_rows(SALE)',
        },
        swap={"/data/tfx/examples/": f"{tmp_path}/tfx/", "postgresql+psycopg://host/db": pg_url},
        names=program,
    )
    assert section.run(section_blocks("Python API")) == 6


def test_images_decoded_on_read_section(tmp_path: Path, tf: Any) -> None:
    """From a folder of images to model.fit and a PyTorch loop: the model takes the decoded
    image (uint8, 32x32x3), which it could not take as bytes."""
    import torch

    write_images(tmp_path / "images", (32, 32, 3))
    section = Section(tmp_path, cli_env(tmp_path), names={"model": keras_model(tf), "torch": torch})
    assert section.run(section_blocks("Images decoded on read")) == 1
    batch = next(iter(section.names["tds"]))
    assert (tuple(batch["image"].shape), batch["image"].dtype) == ((3, 3, 32, 32), torch.float32)


@pytest.fixture
def dask_scheduler() -> Any:
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install '.[test]')")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def empty_database(pg_server: Any, name: str) -> str:
    import sqlalchemy as sa

    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return str(pg_server.url(name))


def test_running_at_scale_section(
    tmp_path: Path, pg_server: Any, pg_url: str, s3_url: str, dask_scheduler: str
) -> None:
    """The PostgreSQL manifest, shards on S3 (moto) and the Dask rewrites, on this machine's
    servers: the README's host names become theirs."""
    moved = empty_database(pg_server, pg_url.rsplit("/", 1)[1] + "_moved")
    cli_inputs(tmp_path / "inputs")
    (tmp_path / "work").mkdir()
    migration = "from catalog.migrate import AddField\noperations = [AddField('height', {'dtype': 'int64'}, default=1)]"
    section = Section(
        tmp_path,
        cli_env(tmp_path),
        before={
            "catalog copy-manifest": "catalog init sqlite-cat > /dev/null && cd sqlite-cat",
            "catalog migrate demo --executor dask": (
                f"cd ~/cat && catalog register demo --schema {tmp_path}/inputs/schema.json > /dev/null"
                f" && catalog append demo {tmp_path}/inputs/rows.jsonl {tmp_path}/inputs/new.jsonl > /dev/null"
                f' && mkdir -p migrations/demo && echo "{migration}" > migrations/demo/0001_height.py'
            ),
        },
        swap={
            "postgresql+psycopg://catalog@db.internal/catalog": pg_url,
            "postgresql+psycopg://catalog@db.internal/moved": moved,
            "s3://bucket/datasets": s3_url,
            "/work/cat": f"{tmp_path}/work/cat",
            "tcp://scheduler:8786": dask_scheduler,
        },
    )
    assert section.run(section_blocks("Running at scale")) == 2
