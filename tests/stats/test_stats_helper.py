"""The statistics helper process (catalog.stats.helper): a tally's batches tallied on another
core give the statistics the writer alone gives; a helper that dies, stalls, fails to start
or is abandoned loses nothing and leaves nothing running."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from crc32c import crc32c

from catalog import Catalog, RecordWriter
from catalog.errors import CatalogError
from catalog.schema import Ragged, Schema
from catalog.stats import DatasetStats, Tally, tally
from catalog.stats import helper as helpers
from catalog.stats.sketches import FeatureStats
from catalog.tfrecord import native
from tests.stats.test_stats import SCHEMA, generated

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the statistics helper is POSIX only")
REPO = Path(__file__).resolve().parents[2]


def ready_helper() -> helpers.Helper:
    """The process's helper, started and ready (it answers within a minute)."""
    helper = helpers.SLOT.borrow()
    assert helper is not None, "no helper could be started"
    deadline = time.monotonic() + 60
    while not helper.ready and time.monotonic() < deadline and not helper.lost:
        helper._take_replies(wait=True)
    helpers.SLOT.give_back(helper)
    assert helper.ready and not helper.lost
    return helper


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Small batches, and a helper that is ready and takes every batch it is offered."""
    monkeypatch.setattr(tally, "BATCH", 500)
    monkeypatch.setattr(helpers, "BACKLOG", 10**6)
    monkeypatch.setattr(helpers.SLOT, "failures", 0)
    ready_helper()
    yield
    assert not helpers.SLOT.busy, "a tally kept the helper"


def records(n: int = 6000, seed: int = 0) -> tuple[Schema, list[bytes]]:
    schema = Schema.from_json(SCHEMA)
    cols = generated(n, seed)
    rows = [{k: v[i] for k, v in cols.items()} for i in range(n)]
    return schema, [schema.encode({k: v for k, v in r.items() if v is not None}) for r in rows]


def exact(fs: FeatureStats, sketched: bool = True) -> dict[str, Any]:
    """What must not depend on how the records were split: counts, ranges, values sketched
    (unless the sketch takes a random sample: a tensor's)."""
    out = {k: getattr(fs, k) for k in ("records", "present", "filled", "missing", "zeros", "nans", "infs")}
    out["values"] = (fs.values.count, fs.values.min, fs.values.max)
    if fs.lengths is not None:
        out["lengths"] = (fs.lengths.count, fs.lengths.min, fs.lengths.max)
    if fs.quantiles is not None and sketched:
        out["sketched"] = fs.quantiles.n
    if fs.top is not None:
        out["top"] = sorted(fs.top_values(10))
    return out


def same_stats(got: DatasetStats, want: DatasetStats, sampled: frozenset[str] = frozenset()) -> None:
    assert (got.records, got.shards) == (want.records, want.shards)
    assert set(got.features) == set(want.features)
    for name, fs in want.features.items():
        mine = got.features[name]
        assert exact(mine, name not in sampled) == exact(fs, name not in sampled), name
        assert mine.values.mean == pytest.approx(fs.values.mean, rel=1e-9), name
        assert mine.values.m2 == pytest.approx(fs.values.m2, rel=1e-9), name


def alone(schema: Schema, recs: list[bytes]) -> DatasetStats:
    t = Tally(schema, helper=False)
    t.add_records(recs)
    return t.result()


def test_helper_tallies_batches_equal_to_the_writer_alone(eager: None) -> None:
    schema, recs = records()
    t = Tally(schema)
    t.fill("word", 7)
    t.add_records(recs)
    got = t.result()
    assert t._sent >= 10  # 12 batches of 500: the first here, the rest sent
    want = alone(schema, recs)
    want.features["word"].filled += 7
    want.features["word"].present -= 7
    same_stats(got, want)


@pytest.mark.parametrize("joined", [False, True], ids=["lists", "ragged"])
def test_helper_gets_the_batches_decoded_by_the_caller(
    eager: None, joined: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's columns go to the helper (helpers.COLUMNS), never the records decoded again."""
    schema, recs = records(3000)
    t = Tally(schema)
    monkeypatch.setattr(helpers.Helper, "offer", lambda *a: pytest.fail("records sent to be decoded again"))
    for start in range(0, len(recs), 500):
        batch = recs[start : start + 500]
        absent: dict[str, np.ndarray] = {}
        ragged: Ragged = {}
        columns = schema.decode_batch(batch, absent, ragged if joined else None)
        assert bool(ragged) == joined  # (the schema has a variable-length list)
        t.add_batch(batch, columns, absent, ragged if joined else None)
    got = t.result()
    assert t._sent == 5
    same_stats(got, alone(schema, recs))


def test_text_columns_go_to_the_helper_as_their_utf8_joined(eager: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text column goes as its UTF-8 joined and each text's size (native.texts_joined), not as
    pickled str objects; the helper makes the same texts again: the statistics are the same.
    Other columns (bytes, numbers) go as they are."""
    if native.NATIVE is None:
        pytest.skip("the C extension is not built here (no C compiler?) or CATALOG_NATIVE=0")
    schema, recs = records(3000)
    sent: list[Any] = []
    offer = helpers.Helper.offer_columns

    def seen(self: Any, payload: Any) -> bool:
        sent.append(pickle.loads(payload()))
        return offer(self, lambda: pickle.dumps(sent[-1]))

    monkeypatch.setattr(helpers.Helper, "offer_columns", seen)
    t = Tally(schema)
    for start in range(0, len(recs), 500):
        batch = recs[start : start + 500]
        absent: dict[str, np.ndarray] = {}
        t.add_batch(batch, schema.decode_batch(batch, absent), absent)
    got = t.result()
    assert t._sent == 5 and len(sent) == 5
    for _n, plain, _joined, texts in sent:
        assert set(texts) == {"word"} and "word" not in plain and "blob" in plain
        assert native.texts_from_joined(*texts["word"]) is not None
    same_stats(got, alone(schema, recs))


def test_append_with_the_helper_equals_append_without(eager: None, tmp_path: Path) -> None:
    cols = generated(4000)
    with_helper = Catalog.init(tmp_path / "a").register("d", SCHEMA)
    with_helper.append_rows(cols, shard_records=2000)
    helpers_off = pytest.MonkeyPatch()
    helpers_off.setattr(helpers.SLOT, "enabled", False)
    try:
        without = Catalog.init(tmp_path / "b").register("d", SCHEMA)
        without.append_rows(cols, shard_records=2000)
    finally:
        helpers_off.undo()
    got, want = with_helper.stats().at, without.stats().at
    assert (got.shards, got.missing_shards) == (want.shards, want.missing_shards) == (2, 0)
    same_stats(got.stats, want.stats)


def test_a_helper_killed_mid_tally_loses_nothing(eager: None) -> None:
    schema, recs = records()
    t = Tally(schema)
    t.add_records(recs[:3000])
    assert t._sent >= 4
    assert t._helper is not None
    t._helper.proc.kill()
    t.add_records(recs[3000:])  # offered to a helper that is gone: tallied here
    got = t.result(lambda: iter([recs[:2500], recs[2500:]]))  # the shard, read again
    same_stats(got, alone(schema, recs))
    assert helpers.SLOT.failures == 1 and helpers.SLOT.helper is None
    assert ready_helper() is not None  # the next tally gets a new one


def test_a_lost_helper_without_the_records_again_registers_nothing(eager: None) -> None:
    schema, recs = records(2000)
    t = Tally(schema)
    t.add_records(recs)
    assert t._helper is not None
    t._helper.proc.kill()
    with pytest.raises(CatalogError, match="statistics helper process ended"):
        t.result()
    assert not helpers.SLOT.busy


def test_a_stalled_helper_is_given_up(eager: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper that stops answering (SIGSTOP) costs STALL seconds, then the shard is reread."""
    monkeypatch.setattr(helpers, "STALL", 1.0)
    schema, recs = records(2000)
    t = Tally(schema)
    t.add_records(recs[:1000])
    helper = t._helper
    assert helper is not None
    os.kill(helper.proc.pid, signal.SIGSTOP)
    try:
        t.add_records(recs[1000:])
        started = time.monotonic()
        got = t.result(lambda: iter([recs]))
        assert time.monotonic() - started < 20
    finally:
        if helper.proc.poll() is None:
            os.kill(helper.proc.pid, signal.SIGCONT)
    same_stats(got, alone(schema, recs))
    assert helper.proc.poll() is not None  # killed, not left stopped


def test_an_abandoned_tally_ends_its_helper(eager: None) -> None:
    schema, recs = records(2000)
    t = Tally(schema)
    t.add_records(recs)
    helper = t._helper
    assert helper is not None
    t.discard()
    assert helper.proc.poll() is not None and not helpers.SLOT.busy
    assert helpers.SLOT.failures == 0  # not the helper's fault
    u = Tally(schema)  # dropped without a word: its finalizer frees the helper
    u.add_records(recs)
    second = u._helper
    assert second is not None and second is not helper
    del u
    assert second.proc.poll() is not None and not helpers.SLOT.busy


def test_no_helper_when_it_cannot_start(eager: None, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.SLOT.shutdown()
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    tallied_alone()
    assert helpers.SLOT.failures == 1


def test_no_helper_on_one_core(eager: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """On one core (taskset -c 0) the helper would only add its copy and decoding of every
    batch to that core's work: the writer tallies alone, and counts no failure."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    tallied_alone()
    assert helpers.SLOT.failures == 0


def tallied_alone() -> None:
    """A tally of 2,000 records made with no helper, its statistics those of tallying alone."""
    schema, recs = records(2000)
    t = Tally(schema)
    t.add_records(recs)
    assert t._helper is None and t._sent == 0
    same_stats(t.result(), alone(schema, recs))


def test_a_helper_that_fails_on_a_batch_reports_it(eager: None) -> None:
    """Records the helper cannot decode (a caller's bug: validated ones always decode): it says
    so, and the tally rereads rather than registering a part."""
    schema, recs = records(1500)
    t = Tally(schema)
    t.add_records(recs[:500])
    t.add_records([b"\xff not a record"] * 500)
    t.add_records(recs[1000:])
    assert t._sent == 2
    got = t.result(lambda: iter([recs]))
    same_stats(got, alone(schema, recs))


def test_helper_ends_with_its_writer(tmp_path: Path) -> None:
    """A writer killed with SIGKILL (no atexit) leaves no helper behind: its pipe closes."""
    script = textwrap.dedent(
        """
        import os, signal, sys, time
        from catalog.stats import helper
        h = helper.SLOT.borrow()
        assert h is not None
        print(h.proc.pid, flush=True)
        while not h.ready:
            h._take_replies(wait=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def open_fds(fds: list[int]) -> list[int]:
    out = []
    for fd in fds:
        try:
            os.fstat(fd)
        except OSError:
            continue
        out.append(fd)
    return out


def test_a_forked_child_does_not_use_its_parents_helper(eager: None) -> None:
    ready_helper()
    parent_helper = helpers.SLOT.helper
    assert parent_helper is not None
    pipes = [parent_helper._in, parent_helper._out]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports whether it sees the parent's helper, and its pipes
        os.write(write, json.dumps([helpers.SLOT.helper is None, helpers.SLOT.busy, open_fds(pipes)]).encode())
        os._exit(0)
    os.close(write)
    seen = json.loads(os.read(read, 100))
    os.waitpid(pid, 0)
    assert seen == [True, False, []]
    assert open_fds(pipes) == pipes
    assert helpers.SLOT.helper is parent_helper and parent_helper is not None and parent_helper.proc.poll() is None


def test_the_helper_imports_this_catalog_not_one_in_its_directory(
    eager: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-c`` puts the working directory first on sys.path: a ``catalog`` package there (a
    user's project) must not be what the helper runs."""
    helpers.SLOT.shutdown()
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "__init__.py").write_text("raise SystemExit('the wrong catalog')\n")
    monkeypatch.chdir(tmp_path)
    schema, recs = records(2000)
    t = Tally(schema)
    t.add_records(recs[:1000])  # the first batch here; the second asks for a helper, not ready yet
    assert t._helper is not None
    deadline = time.monotonic() + 60
    while not t._helper.ready and not t._helper.lost and time.monotonic() < deadline:
        t._helper._take_replies(wait=True)
    assert t._helper.ready
    t.add_records(recs[1000:])
    assert t._sent == 2
    same_stats(t.result(), alone(schema, recs))


def test_an_interrupted_result_ends_its_helper(eager: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the writer waits for the helper's statistics: that reply would reach the
    next tally, so the helper is ended, and the next tally gets a new one."""
    schema, recs = records(2000)
    t = Tally(schema)
    t.add_records(recs)
    helper = t._helper
    assert helper is not None and t._sent
    real = helpers.Helper._take_replies

    def interrupted(self: helpers.Helper, wait: bool) -> bytes | None:
        if wait:
            raise KeyboardInterrupt
        return real(self, wait)

    monkeypatch.setattr(helpers.Helper, "_take_replies", interrupted)
    with pytest.raises(KeyboardInterrupt):
        t.result(lambda: iter([recs]))
    monkeypatch.setattr(helpers.Helper, "_take_replies", real)
    assert helper.proc.poll() is not None and not helpers.SLOT.busy and helpers.SLOT.failures == 0
    u = Tally(schema)
    u.add_records(recs)
    assert u._helper is not None and u._helper is not helper
    same_stats(u.result(), alone(schema, recs))


def test_large_records_are_tallied_by_the_writer(eager: None) -> None:
    """Images cost little per byte to tally: not worth copying to the helper; only the samples
    for their quantile sketch go (its updates are most of their cost)."""
    schema = Schema.from_json({"features": {"img": {"dtype": "uint8", "shape": [48, 48, 3], "encoding": "tensor"}}})
    rng = np.random.default_rng(3)
    recs = [schema.encode({"img": rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)}) for _ in range(3000)]
    t = Tally(schema)
    t.add_records(recs)  # batches of 500 (the fixture's)
    assert t._batches == 6 and t._sent == 5  # every batch tallied here, five samples sent
    got, want = t.result(), alone(schema, recs)
    same_stats(got, want, sampled=frozenset({"img"}))
    for side in (got, want):  # 24 values an image in expectation (tally.PER_RECORD), in runs of 64
        assert abs(side.features["img"].quantiles.n - 3000 * 24) < 0.1 * 3000 * 24
    assert got.features["img"].quantile_values([0.5]) == pytest.approx([127.5], abs=10)


def test_long_payloads_of_a_scalar_schema_are_tallied_by_the_writer(eager: None) -> None:
    """1 KiB bytes a record: digested here a batch at once for less than copying them to the
    helper (which decodes them again); a schema of short scalars still goes to the helper."""
    schema = Schema.from_json({"features": {"id": {"dtype": "int64"}, "payload": {"dtype": "bytes"}}})
    rng = np.random.default_rng(4)
    recs = [schema.encode({"id": i, "payload": rng.bytes(1024)}) for i in range(3000)]
    t = Tally(schema)
    t.add_records(recs)
    assert t._batches == 6 and t._sent == 0
    same_stats(t.result(), alone(schema, recs))
    short = [schema.encode({"id": i, "payload": b"x%d" % (i % 7)}) for i in range(3000)]
    u = Tally(schema)
    u.add_records(short)
    assert u._sent == 5
    same_stats(u.result(), alone(schema, short))


def test_a_process_with_many_descriptors_uses_its_helper() -> None:
    """A server holding over a thousand descriptors: the helper's pipe is past select()'s
    1,023, where select.select raised ValueError and failed the append."""
    script = textwrap.dedent(
        """
        import os, resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 1200 if hard == resource.RLIM_INFINITY else min(hard, 1200)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(want - 64)]
        from catalog.stats import helper, tally
        tally.BATCH, helper.BACKLOG = 500, 10**6
        from tests.stats.test_stats_helper import alone, ready_helper, records, same_stats
        ready_helper()
        schema, recs = records(2000)
        t = tally.Tally(schema)
        t.add_records(recs)
        assert t._sent == 3, t._sent
        pipe = t._helper._out
        same_stats(t.result(), alone(schema, recs))
        print(pipe)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-c", script]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[-1]) > 1023


FILLED_SCHEMA = {"features": {"x": {"dtype": "int64"}, "d": {"dtype": "int64", "default": 7}}}


def batches_of(tally_: Tally, schema: Schema, recs: list[bytes], absent_all: bool) -> None:
    """``recs`` handed over as ingest, adopt and write_decoded do (``add_batch``), 500 at a time;
    ``absent_all``: the writer says it filled ``d`` in every record (it wrote the default)."""
    for start in range(0, len(recs), 500):
        batch = recs[start : start + 500]
        absent: dict[str, np.ndarray] = {}
        columns = schema.decode_batch(batch, absent)
        if absent_all:
            absent = {"d": np.ones(len(batch), dtype=bool)}
        tally_.add_batch(batch, columns, absent)


@pytest.mark.parametrize("written", [False, True], ids=["records-lacking-d", "defaults-written"])
@pytest.mark.parametrize("mixed", [False, True], ids=["batches", "with-records"])
def test_a_lost_helper_keeps_the_filled_counts(eager: None, written: bool, mixed: bool) -> None:
    """Found by an adversarial pass: once the helper was lost, the shard read again counted
    'filled' from its bytes alone: records lacking a feature (a TFRecord input, an adopted
    file) counted twice (present went negative), defaults the writer wrote not at all."""
    schema = Schema.from_json(FILLED_SCHEMA)
    bare = Schema.from_json({"features": {"x": {"dtype": "int64"}}})
    recs = [schema.encode({"x": i, "d": 7}) if written else bare.encode({"x": i}) for i in range(3000)]
    sparse = [bare.encode({"x": i}) for i in range(1000)]  # decoded here: d lacking is filled
    t = Tally(schema)
    if mixed:
        t.add_records(sparse[:500])
    batches_of(t, schema, recs, absent_all=written)
    if mixed:
        t.add_records(sparse[500:])
    assert t._helper is not None and t._sent >= 4
    t._helper.proc.kill()
    shard = (sparse[:500] if mixed else []) + recs + (sparse[500:] if mixed else [])
    got = t.result(lambda: iter([shard[:1200], shard[1200:]]))  # batches that do not align with the tally's
    d = got.features["d"]
    assert (d.records, d.filled, d.present) == (len(shard), len(shard), 0)
    assert helpers.SLOT.failures == 1


def _helper_allowed(_job: int) -> bool:
    return helpers.SLOT.enabled


def test_pool_workers_tally_alone() -> None:
    """Workers of a pool (append, adopt, migrate with --workers) take the cores already: a
    helper each competed with them (2 adopt workers with helpers: 309 against 451 MB/s)."""
    from catalog.executors import make_executor, run_jobs

    executor = make_executor(2, 2)
    assert executor is not None
    with executor:
        assert run_jobs(_helper_allowed, [0, 1], executor, None) == [False, False]
    assert helpers.SLOT.enabled  # the caller's own writes still have one


def test_a_full_first_batch_goes_to_a_helper_already_up(eager: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first batch of EARLY_RECORDS goes to the process's helper when it is up (a migration's
    shard of one batch was decoded and tallied by the writer alone); none is up: tallied here."""
    monkeypatch.setattr(tally, "EARLY_RECORDS", 500)
    schema, recs = records(3000)
    t = Tally(schema)
    t.add_records(recs)
    assert t._sent == 6  # every batch of 500, the first too
    same_stats(t.result(), alone(schema, recs))
    with monkeypatch.context() as m:
        m.setattr(helpers.SLOT, "running", lambda: False)
        u = Tally(schema)
        u.add_records(recs)
        assert u._sent == 5  # the first here: starting a helper for it costs more than it saves
        same_stats(u.result(), alone(schema, recs))
    v = _tallied_decoded(
        schema, recs
    )  # columns in hand: the first batch's are tallied here (the helper would decode it)
    assert v._sent == 5
    same_stats(v.result(), alone(schema, recs))


def _tallied_decoded(schema: Schema, recs: list[bytes]) -> Tally:
    """A tally given batches of 500 records with their columns decoded by the caller."""
    t = Tally(schema)
    for start in range(0, len(recs), 500):
        batch = recs[start : start + 500]
        absent: dict[str, np.ndarray] = {}
        t.add_batch(batch, schema.decode_batch(batch, absent), absent)
    return t


def test_sequence_batches_decoded_by_the_caller_are_tallied_by_the_writer(eager: None) -> None:
    """SequenceExamples' columns in hand are tallied by the writer: the helper would decode
    their records again a step at a time, far behind the writer."""
    schema = Schema.from_json(
        {"features": {"label": {"dtype": "int64"}},
         "sequence_features": {"tokens": {"dtype": "int64"}, "frames": {"dtype": "float32", "shape": [2]}}}
    )  # fmt: skip
    rng = np.random.default_rng(6)
    recs = []
    for i in range(1500):
        steps = int(rng.integers(1, 6))
        row = {"label": i % 3, "tokens": rng.integers(0, 99, steps), "frames": rng.random((steps, 2), dtype=np.float32)}
        recs.append(schema.encode(row))
    t = _tallied_decoded(schema, recs)
    assert t._sent == 0
    same_stats(t.result(), alone(schema, recs))


def test_a_tally_without_threads_counts_large_tensors_in_its_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper's tally (and a writer's whose helper takes spans) leaves the other core to the
    other process: the same exact figures, no thread started."""
    schema = Schema.from_json({"features": {"x": {"dtype": "float32", "shape": [240]}}})
    x = np.random.default_rng(0).standard_normal((5000, 240), dtype=np.float32)
    x[::7, 3] = 0
    threaded = Tally(schema, helper=False)
    threaded.add_columns({"x": x}, len(x), {})
    want = threaded.result().features["x"]

    def no_thread(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a thread was started")

    monkeypatch.setattr(tally, "ThreadPoolExecutor", no_thread)
    alone = Tally(schema, helper=False, threads=False)
    alone.add_columns({"x": x}, len(x), {})
    got = alone.result().features["x"]
    assert exact(got, sketched=False) == exact(want, sketched=False)
    assert got.values.mean == pytest.approx(want.values.mean, rel=1e-12)


def test_a_span_and_a_result_asked_early_come_back_together(eager: None, tmp_path: Path) -> None:
    """adopt hands the helper spans of a file, asks for the result as soon as the file is read,
    then waits for the spans' answers: the statistics that come with them are kept, not lost."""
    schema, recs = records(3000)
    path = tmp_path / "a.tfrecord"
    with RecordWriter(path) as w:
        for r in recs:
            w.write(r)
    data = path.read_bytes()
    t = Tally(schema)
    assert t.offer_span(str(path), 0, len(data), len(recs), crc32c(data))
    t.ask_result()
    assert t._helper is not None
    deadline = time.monotonic() + 60
    while t._helper._reply is None and time.monotonic() < deadline:  # both answers in, read at once
        t._helper._take_replies(wait=True)
    assert t.spans_held()
    same_stats(t.result(), alone(schema, recs))  # (no records to read again: a lost part would raise)


def _objects(*rows: Any) -> np.ndarray:
    out = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        out[i] = row
    return out


@pytest.mark.parametrize(
    "rows",
    [
        [np.arange(3), np.arange(0), np.arange(5, 7)],
        [np.arange(2.0, dtype=np.float32), np.arange(2.0, dtype=np.float32)],  # equal lengths
        [np.arange(0), np.arange(0)],
    ],
)
def test_a_column_of_arrays_goes_to_the_helper_joined_and_comes_back_the_same(rows: list[np.ndarray]) -> None:
    column = _objects(*rows)
    packed = tally.joined_arrays(column)
    assert packed is not None
    flat, counts = packed  # decode_batch's ragged form: each row is its count of the values in turn
    back = np.split(flat, np.cumsum(counts)[:-1])
    assert len(back) == len(column)
    for got, want in zip(back, rows, strict=True):
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize(
    "column",
    [
        _objects(np.arange(2), None),  # an optional feature's missing row
        _objects(np.arange(2), np.arange(2.0)),  # two dtypes
        _objects(np.zeros((2, 2)), np.zeros((1, 2))),  # not 1-D
        _objects("a", "b"),
        np.arange(3),
    ],
)
def test_other_columns_go_to_the_helper_as_they_are(column: np.ndarray) -> None:
    assert tally.joined_arrays(column) is None
