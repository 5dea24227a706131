"""demo migration 0003: brightness from the image; vec becomes variable-length.

Computed fields run on decoded rows, in parallel worker processes that import this file
themselves (so plain functions and lambdas both work). Every output row is validated
against the new schema. A cast that would change a value (1.5 to int64, say) stops the
migration naming the shard and record, unless it says `lossy=True`.
"""

from typing import Any

import numpy as np

from catalog.migrate import AddField, CastField


def brightness(row: dict[str, Any]) -> float:
    """Mean pixel value of the uint8 image, scaled to [0, 1]."""
    return float(np.asarray(row["image"], dtype=np.float32).mean() / 255.0)


operations = [
    AddField("brightness", {"dtype": "float32"}, fn=brightness),
    CastField("vec", {"dtype": "float32", "shape": [None]}),
]
