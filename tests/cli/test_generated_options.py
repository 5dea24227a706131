"""One options type per verb that commits (catalog/ops/options.py), written once: the CLI's
flags of a verb are generated from its type's fields (catalog/cli/generated.py), and the API
methods of the verb take every field as a keyword of the same name, type and default."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from catalog import Catalog, Dataset
from catalog.cli import app
from catalog.cli.generated import OptionsCommand, placed
from catalog.manifest import DEFAULT_SPLIT
from catalog.ops import options as opts
from catalog.ops.options import Flag, flag_of, option

runner = CliRunner()

# Each generated verb: its options type, and the fields it offers as no flag.
VERBS = {
    "append": (opts.AppendOptions, set()),
    "adopt": (opts.AdoptOptions, set()),
    "register": (opts.RegisterOptions, {"author"}),
    "migrate": (opts.MigrateOptions, {"author"}),
    "compact": (opts.CompactOptions, {"author"}),
    "restore": (opts.RestoreOptions, {"author"}),
    "delete": (opts.DeleteOptions, set()),
    "update": (opts.UpdateOptions, set()),
    "filter": (opts.FilterOptions, set()),
    "map": (opts.MapOptions, set()),
    "refresh": (opts.RefreshOptions, {"token"}),
    "dedup": (opts.DedupOptions, set()),
}
# Each API method of a verb: its options type, and the fields it does not take (it sets them).
METHODS: list[tuple[Callable[..., Any], type[opts.CommitOptions], set[str]]] = [
    (Dataset.append_rows, opts.WriteOptions, {"allow_duplicate"}),  # rows: always allowed
    (Dataset.writer, opts.WriteOptions, {"allow_duplicate", "check", "max_linf"}),
    (Dataset.append_files, opts.AppendOptions, set()),
    (Dataset.adopt, opts.AdoptOptions, set()),
    (Catalog.adopt, opts.AdoptOptions, set()),
    (Catalog.register, opts.RegisterOptions, {"author", "split"}),  # a schema given: nothing appended
    (Catalog.register_inferred, opts.RegisterOptions, set()),
    (Dataset.migrate, opts.MigrateOptions, set()),
    (Dataset.compact, opts.CompactOptions, set()),
    (Dataset.restore, opts.RestoreOptions, set()),
    (Dataset.delete, opts.DeleteOptions, set()),
    (Dataset.update, opts.UpdateOptions, set()),
    (Dataset.filter, opts.FilterOptions, set()),
    (Dataset.map, opts.MapOptions, set()),
    (Dataset.refresh, opts.RefreshOptions, {"token"}),  # a refresh is asked again, not retried
    (Dataset.dedup, opts.DedupOptions, set()),
]


def test_every_verb_that_commits_is_generated() -> None:
    generated = {name for name, cmd in get_command(app).commands.items() if isinstance(cmd, OptionsCommand)}  # type: ignore[attr-defined]
    assert generated == set(VERBS)


def command(verb: str) -> Any:
    return get_command(app).commands[verb]  # type: ignore[attr-defined]


def default_of(options: type[opts.CommitOptions], name: str) -> Any:
    return next(f.default for f in fields(options) if f.name == name)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_verbs_flags_are_its_options_fields(verb: str) -> None:
    options, withheld = VERBS[verb]
    cmd = command(verb)
    assert isinstance(cmd, OptionsCommand) and cmd.options == options.__name__
    by_name = {p.name: p for p in cmd.params}
    for f in fields(options):
        if f.name in withheld:
            assert f.name not in by_name, f.name
            continue
        flag, param = flag_of(options, f.name), by_name.get(f.name)
        assert param is not None, f"{verb}: {f.name} is no flag"
        assert (tuple(param.opts), param.help, param.default) == (flag.names, flag.help, f.default), f.name


def test_the_help_shows_the_fields_flags() -> None:
    result = runner.invoke(app, ["append", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    for f in fields(opts.AppendOptions):
        flag = flag_of(opts.AppendOptions, f.name)
        assert flag.names[0] in result.stdout and flag.help.split(" (")[0] in result.stdout, f.name


def taken(method: Callable[..., Any]) -> dict[str, tuple[Any, Any]]:
    """A method's keywords with their annotation and default: those of a ``**kw:
    Unpack[SomeKeywords]`` too (a keyword set of catalog.ops.options), whose default is the
    options type's field's (the method builds its options with ``taking``): ``BY_OPTIONS``."""
    out: dict[str, tuple[Any, Any]] = {}
    for p in inspect.signature(method).parameters.values():
        if p.kind is not inspect.Parameter.VAR_KEYWORD:
            out[p.name] = (p.annotation, p.default)
            continue
        match = re.fullmatch(r"Unpack\[(\w+)\]", str(p.annotation))
        assert match, f"{method.__qualname__}: **{p.name} is no keyword set"
        keywords = getattr(opts, match[1])
        for name, ref in keywords.__annotations__.items():
            out[name] = (ref.__forward_arg__, BY_OPTIONS)
    return out


BY_OPTIONS = object()  # a keyword of a set: its default is the options type's


@pytest.mark.parametrize(("method", "options", "not_taken"), METHODS, ids=lambda m: getattr(m, "__qualname__", ""))
def test_an_api_method_takes_its_options_fields(
    method: Callable[..., Any], options: type[opts.CommitOptions], not_taken: set[str]
) -> None:
    params = taken(method)
    for f in fields(options):
        if f.name in not_taken:
            assert f.name not in params, f"{method.__qualname__} takes {f.name}: drop it from not_taken"
            continue
        p = params.get(f.name)
        assert p is not None, f"{method.__qualname__} does not take {options.__name__}.{f.name}"
        annotation, default = p
        assert annotation == f.type, f"{method.__qualname__}({f.name})"
        assert default in (f.default, BY_OPTIONS), f"{method.__qualname__}({f.name})"


def test_a_keyword_set_takes_its_defaults_from_the_options() -> None:
    """A keyword a caller leaves out of a set is the options type's default, and one the set
    does not name is refused as Python refuses a keyword a signature lacks."""
    assert opts.CommitOptions.taking({}) == opts.CommitOptions()
    given: opts.VerbKeywords = {"message": "m", "workers": 2}
    assert opts.CommitOptions.taking(given) == opts.CommitOptions(message="m")
    assert opts.jobs_of(given) == {"workers": 2}
    with pytest.raises(TypeError, match=r"delete\(\) got an unexpected keyword argument 'wrokers'"):
        opts.check_keywords("delete", {"wrokers": 2}, opts.VerbKeywords)


def test_every_field_has_a_flag() -> None:
    types = [t for t in vars(opts).values() if isinstance(t, type) and issubclass(t, opts.CommitOptions)]
    for t in types:
        for f in fields(t):
            if t in (opts.WriteOptions,) and f.name == "allow_duplicate":
                continue  # append_rows' and writer's: no verb offers it (append's is AppendOptions')
            assert isinstance(flag_of(t, f.name), Flag)
            assert f.default is not MISSING


def test_the_default_split_is_the_manifests() -> None:
    assert opts.DEFAULT_SPLIT == DEFAULT_SPLIT
    assert default_of(opts.WriteOptions, "split") == DEFAULT_SPLIT


def test_a_new_field_is_a_flag_of_the_verb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Written once: a field added to the options type is a flag of the verb, at the end."""

    @dataclass(frozen=True)
    class Wider(opts.AppendOptions):
        shout: bool = option(False, "--shout", help="Commit loudly.")

    monkeypatch.setattr(opts, "AppendOptions", Wider)
    cmd = command("append")
    assert [p.name for p in cmd.params][-1] == "shout"
    result = runner.invoke(app, ["append", "--help"], env={"COLUMNS": "400"})
    assert "--shout" in result.stdout and "Commit loudly." in result.stdout


def test_a_layout_naming_nothing_is_refused() -> None:
    assert placed(("a", "f"), ("f", "g", "h"), {"a"}, {"h"}) == ["a", "f", "g"]
    with pytest.raises(TypeError, match="neither parameters of the verb nor fields"):
        placed(("a", "typo"), ("f",), {"a"}, set())


def test_reading_the_options_loads_no_library() -> None:
    """The CLI reads the options to parse a verb's arguments and show its help."""
    code = "import sys, catalog.ops.options\nprint(' '.join(sys.modules))"
    modules = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert not {m for m in modules if m.split(".")[0] in ("sqlalchemy", "numpy", "google")}
    assert {m for m in modules if m.startswith("catalog.")} <= {
        "catalog.lazy",
        "catalog.keywords",
        "catalog.ops",
        "catalog.ops.options",
    }
