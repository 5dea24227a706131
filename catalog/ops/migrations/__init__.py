"""Schema migrations, bottom to top: `operations` (what scripts declare; scripts import it
as `catalog.migrate`), `scripts` (finding, loading and writing the script files) and
`runner` (planning, rewriting every shard, one commit per migration). Import the module
you need: this package imports none of them, so a script's `from catalog.migrate import
AddField` loads the operations alone."""
