"""pytest collects the pages' examples here (tests/doc_examples.py says how they run).

docs/how-to/scale.md reads the ``SCALE_*`` and AWS variables its introduction names: here they
name throwaway servers on this machine (tests/servers.py, which `python tests/servers.py` also
starts by hand). Where one cannot run, the page is skipped with the reason; under CI=true that
is a failure, as every skip is in tests/conftest.py.
"""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from doc_examples import pages  # (from tests/, put on the path just above)
from servers import IN_CI, Unavailable, start_scale

HERE = Path(__file__).resolve().parent
SCALE = "how-to/scale.md"


@pytest.fixture(scope="session")
def scale_servers() -> Iterator[dict[str, str]]:
    try:
        env, stops = start_scale()
    except Unavailable as e:
        reason = f"{SCALE} needs PostgreSQL, S3 (moto) and Dask on this machine: {e}"
        if IN_CI:
            pytest.fail(f"under CI=true this page must run: {reason}")
        pytest.skip(reason)
    yield env
    for stop in stops:
        stop()


@pytest.fixture
def scale_env(scale_servers: dict[str, str]) -> None:
    """The variables, in the page's environment (set up by then; its teardown restores it)."""
    os.environ.update(scale_servers)


pytest_collect_file = (pages(HERE, excludes=(SCALE,)) + pages(HERE, (SCALE,), fixtures=("scale_env",))).pytest()
