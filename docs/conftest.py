"""pytest collects the pages' examples here (tests/doc_examples.py says how they run)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from doc_examples import pages  # (from tests/, put on the path just above)

pytest_collect_file = pages(Path(__file__).resolve().parent).pytest()
