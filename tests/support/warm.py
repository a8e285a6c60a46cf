"""Imported last by the forkserver of `tests/support/launch.py` (its PRELOAD), never by a
test: fills the caches bucketd keeps per process (`launch.warm_caches`), then freezes the
garbage collector's view of everything the forkserver holds (`gc.freeze()`), so that a
fork's full collections leave the imports and the S3 models (tens of megabytes of objects)
alone instead of walking them each time, as `tests/support/shims.py` does for its forks."""

from __future__ import annotations

import gc

from tests.support.launch import warm_caches

warm_caches()
gc.freeze()
