"""Typer commands built from the typed models: each model field with a Flag becomes an option of the commands that
take it, with the field's type, help, default and panel; nothing about a flag is restated here.

A command's options default to None, so the command passes on only what the user typed and the model decides every
default. Errors are one line on stderr (for ``--json`` commands also ``{"error": ..., "exit_code": ...}`` on
stdout), usage errors from click included.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gpuwise.cli.output import emit_error, guard
from gpuwise.flags import Flag, choices, flag_fields

OUTPUT = "Output and data"
# typer vendors its own click: its usage errors derive from the ClickException that typer.BadParameter derives from
_CLICK_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


@dataclass(frozen=True)
class Arg:
    """A positional argument of a shell command (MODEL, GPU, FILE)."""

    name: str
    help: str
    required: bool = True
    multiple: bool = False
    metavar: str | None = None


@dataclass(frozen=True)
class Opt:
    """An option of the shell itself (output, files to read or write), not a field of a typed model."""

    name: str
    flag: str
    help: str
    kind: Any = bool  # bool, Path, str or list[Path]
    panel: str = OUTPUT
    metavar: str | None = None
    aliases: tuple[str, ...] = ()  # other spellings of ``flag`` (llama.cpp's -hf)


JSON = Opt("as_json", "--json", "Print machine-readable JSON (errors too: {\"error\": ..., \"exit_code\": ...}).")
CATALOG = Opt("catalog", "--catalog", "YAML file of GPU/offer records that add to or patch the shipped catalog "
              "(repeatable).", list[Path], metavar="FILE")


@dataclass(frozen=True)
class Source:
    """Model fields whose values go to one place: ``key`` in :class:`Given`."""

    key: str
    fields: Mapping[str, tuple[FieldInfo, Flag]]

    @classmethod
    def of(cls, key: str, model: type[BaseModel], command: str) -> Source:
        return cls(key, {name: (info, flag) for name, info, flag in flag_fields(model, command)})


@dataclass
class Given:
    """What the user typed: positional arguments, shell options, and model values by source (typed ones only)."""

    args: dict[str, Any] = field(default_factory=dict)
    shell: dict[str, Any] = field(default_factory=dict)
    values: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self.values.get(key, {})


def _default_text(info: FieldInfo) -> str | bool:
    default = info.default
    if default is PydanticUndefined or default is None:
        return False
    if isinstance(default, tuple):
        return ", ".join(map(str, default)) or False
    return str(default).lower() if isinstance(default, bool) else str(default)


def _python_type(info: FieldInfo) -> Any:
    """The click-facing type of a field: str for choices and text, int/float for numbers, a list for tuples."""
    annotation = info.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1
    inner = args[0] if optional else annotation
    if typing.get_origin(inner) is tuple:
        return list[str]
    if inner in (bool, int, float):
        return inner
    return str


def _metavar(info: FieldInfo, flag: Flag) -> str:
    accepted = choices(info)
    if flag.metavar:
        return flag.metavar
    if accepted and len("|".join(accepted)) <= 40:
        return "|".join(accepted)
    return {int: "N", float: "X"}.get(_python_type(info), "TEXT")


def _help(info: FieldInfo, flag: Flag) -> str:
    """The field's description as a sentence, with the accepted values where the metavar cannot show them all."""
    text = (info.description or "").strip().rstrip(".")
    accepted = choices(info)
    if accepted and "|" not in _metavar(info, flag) and _python_type(info) is not bool:
        text += f"; one of: {', '.join(accepted)}"
    return text + "."


def _field_options(name: str, info: FieldInfo, flag: Flag) -> list[tuple[str, Any, Any]]:
    """(parameter name, annotation, typer.Option) for one field; a choice-flags field gives one flag per choice."""
    if flag.choice_flags is not None:
        return [(f"{name}__{i}", bool | None, typer.Option(None, spelled, help=f"{_help(info, flag)[:-1]}: {choice}.",
                                                             rich_help_panel=flag.panel))
                for i, (choice, spelled) in enumerate(flag.choice_flags.items())]
    kind = _python_type(info)
    spelled = flag.spelling(name)
    if kind is bool:
        decl = f"{spelled}/--no-{spelled[2:]}" if info.default is True or flag.negatable else spelled
        return [(name, bool | None, typer.Option(None, decl, help=_help(info, flag), rich_help_panel=flag.panel,
                                                 show_default=_default_text(info)))]
    return [(name, kind | None, typer.Option(None, spelled, help=_help(info, flag), rich_help_panel=flag.panel,
                                             show_default=_default_text(info), metavar=_metavar(info, flag)))]


def _shell_option(opt: Opt) -> tuple[str, Any, Any]:
    if opt.kind is bool:
        return opt.name, bool, typer.Option(False, opt.flag, help=opt.help, rich_help_panel=opt.panel)
    return opt.name, opt.kind | None, typer.Option(None, opt.flag, *opt.aliases, help=opt.help,
                                                   rich_help_panel=opt.panel, metavar=opt.metavar)


def _argument(arg: Arg) -> tuple[str, Any, Any]:
    kind = list[str] if arg.multiple else str
    default = ... if arg.required else None
    return arg.name, kind if arg.required else kind | None, typer.Argument(default, help=arg.help,
                                                                         metavar=arg.metavar)


def _collect(kwargs: dict[str, Any], args: Iterable[Arg], sources: Iterable[Source], shell: Iterable[Opt]) -> Given:
    given = Given()
    for arg in args:
        given.args[arg.name] = kwargs.get(arg.name)
    for opt in shell:
        given.shell[opt.name] = kwargs.get(opt.name)
    claimed: set[str] = {arg.name for arg in args}
    for source in sources:
        typed: dict[str, Any] = {}
        for name, (_info, flag) in source.fields.items():
            if name in claimed:  # a field two sources share goes to the first, as its option was made for it
                continue
            claimed.add(name)
            if flag.choice_flags is not None:
                chosen = tuple(c for i, c in enumerate(flag.choice_flags) if kwargs.get(f"{name}__{i}"))
                if chosen:
                    typed[name] = chosen
            elif kwargs.get(name) is not None:
                typed[name] = tuple(kwargs[name]) if isinstance(kwargs[name], list) else kwargs[name]
        given.values[source.key] = typed
    return given


FLAG_OWNERS: dict[str, set[str]] = {}
"""Each flag's spelling -> the commands that take it, to name them when a command is given another's flag."""


def _own(command: str, params: list[tuple[str, Any, Any]]) -> None:
    for _name, _kind, info in params:
        for decl in getattr(info, "param_decls", None) or ():
            for spelled in str(decl).split("/"):
                if spelled.startswith("--"):
                    FLAG_OWNERS.setdefault(spelled, set()).add(command)


def define(app: typer.Typer, name: str, help_text: str, run: Callable[[Given], None], *, args: Iterable[Arg] = (),
           sources: Iterable[Source] = (), shell: Iterable[Opt] = (), doc: str | None = None) -> None:
    """Register ``gpuwise NAME``: its options are the sources' flag fields (deduplicated by name) and ``shell``."""
    args, shell = tuple(args), tuple(shell)
    sources = tuple(sources)
    params: list[tuple[str, Any, Any]] = [_argument(a) for a in args]
    seen: set[str] = set(a.name for a in args)
    for source in sources:
        for field_name, (info, flag) in source.fields.items():
            if field_name not in seen:
                seen.add(field_name)
                params += _field_options(field_name, info, flag)
    params += [_shell_option(o) for o in shell]
    _own(name, params)

    def command(**kwargs: Any) -> None:
        given = _collect(kwargs, args, sources, shell)
        with guard(as_json=bool(given.shell.get("as_json"))):
            run(given)

    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=t) for n, t, d in params])
    command.__annotations__ = {n: t for n, t, _ in params}
    command.__doc__ = doc or help_text
    app.command(name, help=help_text)(command)


class GpuwiseGroup(typer.core.TyperGroup):
    """The top-level group: click's usage errors (unknown option, bad integer, missing argument) become one line,
    JSON for ``--json`` commands, exit code 2; an error gpuwise did not mean to raise is one line and exit 1."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if argv[:2] == ["bench", "collective"]:  # `bench collective` is bench-collective: bench keeps its options
            argv = ["bench-collective", *argv[2:]]
        try:
            result = super().main(args=argv, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                                  windows_expand_args=windows_expand_args, **extra)
        except _CLICK_ERROR as error:
            exc: Any = error
            if type(exc).__name__ == "NoArgsIsHelpError":  # a group called bare: its help is the answer
                stdout_help = exc.ctx.get_help() if getattr(exc, "ctx", None) is not None else ""
                sys.stdout.write(stdout_help + "\n")
                sys.exit(0)
            message = exc.format_message().replace("\n", " ")
            flag = str(getattr(exc, "option_name", ""))
            if FLAG_OWNERS.get(flag):
                message = (f"No such option: {flag}; it applies to "
                           f"{', '.join('gpuwise ' + c for c in sorted(FLAG_OWNERS[flag]))}")
            emit_error(message, 2, as_json="--json" in argv)
            sys.exit(2)
        except typer.Abort:
            sys.stderr.write("aborted\n")
            sys.exit(130)
        code = result if isinstance(result, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def alias_spellings() -> dict[str, str]:
    """Every alias of a job flag (and its --no- form) -> the flag's own spelling."""
    from gpuwise.api.shell import JOB_MODELS

    table: dict[str, str] = {}
    for model in JOB_MODELS.values():
        for name, _info, flag in flag_fields(model):
            own = flag.spelling(name)
            for alias in flag.aliases:
                table[alias], table["--no-" + alias[2:]] = own, "--no-" + own[2:]
    return table


def canonical_argv(argv: list[str]) -> list[str]:
    """``argv`` with each flag alias written as the flag it stands for (the help lists one spelling per flag)."""
    table = alias_spellings()
    return [table.get(arg, arg) for arg in argv]
