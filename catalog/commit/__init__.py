"""The commit layer (see ARCHITECTURE.md), bottom to top: `values` (what callers get back),
`listing` (the datasets' summary, from the manifest alone), `handles` (the manifest's read
side: live shards, snapshots, history), `intents` (write intents and their heartbeat) and
`protocol` (the one commit protocol every change goes through). Import the module you
need: this package imports none of them, so the light ones stay light."""
