"""The operations: what changes or examines a catalog's datasets, one module per verb family,
above the readers and the commit layer and below the API (`Catalog`, `Dataset`) and the CLI.

- ``adopt``: existing files registered where they are, or brought in (``--copy``/``--link``)
- ``ingest``: inputs validated against the schema and written as shards (``append``)
- ``writer``: an append's shards under a write intent, then one commit
- ``migrations``: schema migrations (``operations`` -> ``scripts`` -> ``runner``)
- ``rewrite``: compact and restore
- ``export``: a version (or split) into one TFRecord file
- ``maintenance``: verify and gc
- ``provision``: creating a catalog, copy-manifest, backup
- ``indexing``: record indexes for shards without one, DALI's index files
- ``inspection``: ``catalog inspect`` of files outside a catalog
- ``describe``: statistics reports (``catalog stats``)
"""
