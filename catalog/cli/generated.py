"""The flags of a verb's options type, generated from its fields (catalog/ops/options.py).

A verb says which options type it takes and where each flag stands among its own
parameters (:func:`takes`); its body gets the options object, built from the flags given, as
its ``options`` parameter. The flag of a field (names, help, default, type) is the field's, so
an option is written once, in the library.

The flags are made when the verb needs its parameters (to parse its arguments or show its
help), not when the CLI starts: ``catalog --help`` lists the verbs without loading the
library's options module (tests/cli/test_cli_startup.py).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Container
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_type_hints

import typer
from typer.core import TyperCommand
from typer.main import get_params_convertors_ctx_param_name_from_function

from catalog.cli.options import AsJson, ExecutorKind, Jobs, LibraryChoice, Scheduler, Workers, compressions, parse_bytes

if TYPE_CHECKING:
    from catalog.ops.options import CommitOptions, Flag

OPTIONS_MODULE = "catalog.ops.options"
_PARSERS: dict[str, Callable[[str], Any]] = {"bytes": parse_bytes}
_LIBRARY: dict[str, Callable[[], Any]] = {"compression": compressions}


def options_type(name: str) -> type[CommitOptions]:
    """The options type ``name`` of catalog.ops.options (imported now, not at start-up)."""
    found: type[CommitOptions] = getattr(importlib.import_module(OPTIONS_MODULE), name)
    return found


def field_names(options: type[CommitOptions]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(options))


def flag_parameter(options: type[CommitOptions], name: str) -> inspect.Parameter:
    """The typer parameter of ``options``' field ``name``: its flag, its type, its default."""
    from catalog.ops.options import flag_of

    f = next(f for f in fields(options) if f.name == name)
    flag = flag_of(options, name)
    annotation: Any = get_type_hints(options)[name]
    if flag.choices:  # a closed set: typer's choice, as a Literal annotation makes it
        closed: Any = Literal.__getitem__(flag.choices)
        annotation = closed | None if f.default is None else closed
    default = f.default if f.default is not MISSING else inspect.Parameter.empty
    typed = Annotated[annotation, typer.Option(*flag.names, **_typer_settings(flag))]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=typed, default=default)


def _typer_settings(flag: Flag) -> dict[str, Any]:
    settings: dict[str, Any] = {"help": flag.help}
    if flag.metavar is not None:
        settings["metavar"] = flag.metavar
    if flag.min is not None:
        settings["min"] = flag.min
    if flag.max is not None:
        settings["max"] = flag.max
    if flag.parser is not None:
        settings["parser"] = _PARSERS[flag.parser]
    if flag.library is not None:
        settings["click_type"] = LibraryChoice(_LIBRARY[flag.library])
    return settings


def _click_params(options: type[CommitOptions], names: tuple[str, ...]) -> dict[str, Any]:
    """typer's click parameters of the flags of ``options``' fields ``names``."""

    def flags() -> None: ...

    flags.__signature__ = inspect.Signature([flag_parameter(options, n) for n in names])  # type: ignore[attr-defined]
    params, convertors, _context = get_params_convertors_ctx_param_name_from_function(flags)
    if convertors:  # (typer converts paths, enums and lists: no field is one of them)
        raise TypeError(f"{options.__name__}: fields {sorted(convertors)} need converting")
    return {str(p.name): p for p in params}


class OptionsCommand(TyperCommand):
    """A command whose parameters include flags generated from an options type (see the
    module's docstring), made the first time they are needed."""

    options: str = ""  # the options type's name in catalog.ops.options
    layout: tuple[str, ...] = ()  # parameters' names in the help's order (see takes)
    withheld: frozenset[str] = frozenset()  # fields offered as no flag
    _own: list[Any]
    _all: list[Any] | None

    @property
    def params(self) -> list[Any]:
        if self._all is None:
            own = {p.name: p for p in self._own}
            names = placed(self.layout, field_names(options_type(self.options)), own, self.withheld)
            generated = _click_params(options_type(self.options), tuple(n for n in names if n not in own))
            self._all = [own.get(n) or generated[n] for n in names]
        return self._all

    @params.setter
    def params(self, value: list[Any]) -> None:
        self._own, self._all = list(value), None


def placed(layout: tuple[str, ...], fields: tuple[str, ...], own: Container[str], hidden: Container[str]) -> list[str]:
    """The parameters of a verb in the help's order: ``layout``'s, then the fields it does not
    name, in their order, but ``hidden`` ones. A name of ``layout`` that is neither the verb's
    own parameter nor a field is a mistake: refused."""
    stray = [n for n in layout if n not in own and n not in fields]
    if stray:
        raise TypeError(f"{stray}: neither parameters of the verb nor fields of its options")
    return [*layout, *(n for n in fields if n not in layout and n not in hidden)]


def _json_parameter() -> inspect.Parameter:
    """``--json``: every verb that commits can print its report as JSON (read by ``verb``)."""
    return inspect.Parameter("as_json", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=AsJson, default=False)


def _job_parameters() -> list[inspect.Parameter]:
    """``--workers``, ``--executor`` and ``--scheduler``: where a verb's per-shard jobs run."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return [
        inspect.Parameter("workers", kind, annotation=Workers, default=None),
        inspect.Parameter("executor", kind, annotation=ExecutorKind, default="local"),
        inspect.Parameter("scheduler", kind, annotation=Scheduler, default=None),
    ]


def takes(
    options: str, layout: str, hidden: str = "", base: type[TyperCommand] = TyperCommand, jobs: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A verb that takes the options type named ``options`` (catalog.ops.options): each of its
    fields is a flag of the verb, but the ``hidden`` ones (they keep their defaults). Its body
    takes the options object, built from the flags given, as ``options``. ``layout`` names its
    parameters in the help's order, its own and the fields'; a field it does not name comes
    after them. ``base``: the command class (a TyperCommand) the generated one extends.
    ``jobs``: the verb runs per-shard jobs: it has ``--workers``, ``--executor`` and
    ``--scheduler``, and its body takes them as ``jobs`` (:class:`catalog.cli.options.Jobs`).
    Every such verb has ``--json`` (``as_json``, which ``catalog.cli.base.verb`` reads: the
    body does not take it)."""
    settings = {"options": options, "layout": tuple(layout.split()), "withheld": frozenset(hidden.split())}
    made = ("options", "jobs")  # the body's parameters this decorator builds

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(body)
        mine = [_evaluated(body, p) for name, p in own.parameters.items() if name not in made]
        job_parameters = _job_parameters() if jobs else []
        extra = [*job_parameters, _json_parameter()]

        @functools.wraps(body)
        def verb(**given: Any) -> Any:
            given.pop("as_json")
            run = {p.name: given.pop(p.name) for p in job_parameters}
            values = {n: given.pop(n) for n in list(given) if n not in own.parameters}
            built = {"jobs": Jobs(**run)} if jobs else {}
            return body(**given, options=options_type(options)(**values), **built)

        verb.__signature__ = own.replace(parameters=mine + extra)  # type: ignore[attr-defined]
        verb.__annotations__ = {k: v for k, v in body.__annotations__.items() if k not in made}
        verb.__annotations__ |= {p.name: p.annotation for p in extra}
        verb.command = type(f"{body.__name__}_command", (OptionsCommand, base), settings)  # type: ignore[attr-defined]
        return verb

    return decorate


def _evaluated(body: Callable[..., Any], p: inspect.Parameter) -> inspect.Parameter:
    """``p`` with its annotation evaluated, as typer's own reading of a signature does (the
    options parameter's is left out: its type is imported for the type checker only)."""
    if isinstance(p.annotation, str):
        return p.replace(annotation=eval(p.annotation, body.__globals__))
    return p
