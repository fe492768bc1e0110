"""How a field of a typed model appears on the command line, and building a model from flag values with one-line
errors that name the flag.

A field is a flag when its annotation carries a :class:`Flag`: ``count: Annotated[int, Field(ge=1), Flag(...)]``.
The pydantic field is the single definition of the flag's type, range, default and help (its description); the
Flag adds which commands take it and the help panel it is listed under. The CLI builds its options from these; the
API, the web app and scenario files validate the same models.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from gpuwise.errors import ConfigError
from gpuwise.safe_io import excerpt

JOB_COMMANDS = frozenset({"estimate", "fit", "scale", "serve-sim", "recommend"})
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Flag:
    """The command-line side of a model field."""

    commands: frozenset[str]
    panel: str
    name: str | None = None  # the flag's spelling when it is not --field-name, e.g. "--os"
    refused: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (command, task) -> why not there
    choice_flags: Mapping[str, str] | None = None  # a tuple of choices set by one boolean flag per choice
    metavar: str | None = None
    accepted: tuple[str, ...] | None = None  # the values to list in help when the field's own type is narrower
    negatable: bool = False  # a boolean flag with a --no- form even though its default is not true
    aliases: tuple[str, ...] = ()  # other spellings the flag answers to (the names an issue or a framework uses)

    def spelling(self, field_name: str) -> str:
        return self.name or "--" + field_name.replace("_", "-")


def flag_of(info: FieldInfo) -> Flag | None:
    return next((m for m in info.metadata if isinstance(m, Flag)), None)


def flag_fields(model: type[BaseModel], command: str | None = None) -> Iterator[tuple[str, FieldInfo, Flag]]:
    """(name, field, flag) of every flag field of ``model`` (that ``command`` takes, when given)."""
    for name, info in model.model_fields.items():
        flag = flag_of(info)
        if flag is not None and (command is None or command in flag.commands):
            yield name, info, flag


def spelling(model: type[BaseModel], name: str) -> str:
    info = model.model_fields.get(name)
    flag = flag_of(info) if info is not None else None
    return flag.spelling(name) if flag else "--" + name.replace("_", "-")


def choices(info: FieldInfo) -> tuple[str, ...]:
    """The accepted values of a Literal (or tuple-of-Literal, or optional Literal) field; () for other types."""
    flag = flag_of(info)
    if flag is not None and flag.accepted is not None:
        return flag.accepted
    annotation: Any = info.annotation
    for _ in range(3):
        args = [a for a in typing.get_args(annotation) if a is not type(None) and a is not Ellipsis]
        if typing.get_origin(annotation) is typing.Literal:
            return tuple(str(a) for a in typing.get_args(annotation))
        if len(args) != 1:
            return ()
        annotation = args[0]
    return ()


def check_command(model: type[BaseModel], values: Mapping[str, object], *, command: str, task: str | None) -> None:
    """Refuse a value the command would ignore: a flag it does not take, or one it decides itself."""
    for name in values:
        info = model.model_fields.get(name)
        flag = flag_of(info) if info is not None else None
        if flag is None:
            continue
        if command not in flag.commands:
            users = ", ".join(f"gpuwise {c}" for c in sorted(flag.commands))
            raise ConfigError(f"{flag.spelling(name)} is not used by `gpuwise {command}`; it applies to {users}")
        why = flag.refused.get((command, task or ""))
        if why:
            raise ConfigError(f"{flag.spelling(name)}: {why}")


def one_line(model: type[BaseModel], exc: ValidationError, *, prefix: str = "") -> str:
    """The first validation error as ``--flag: what is wrong``, naming the accepted choices where there are."""
    err = exc.errors()[0]
    location = [str(p) for p in err["loc"]]
    name = location[0] if location else ""
    info = model.model_fields.get(name)
    flag = spelling(model, name) if info is not None else (prefix + ".".join(location) if location else "")
    accepted = choices(info) if info is not None else ()
    if accepted and err["type"] in ("literal_error", "enum"):
        return f"{flag} {excerpt(err.get('input'))} is not accepted; use one of: {', '.join(accepted)}"
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = f"unknown option {name!r}; accepted: {', '.join(sorted(model.model_fields))}"
        return message if not prefix else f"{prefix}{message}"
    return f"{flag}: {message}" if flag else message


def build(model: type[M], values: Mapping[str, object]) -> M:
    """Validate ``values`` into ``model``; a one-line ConfigError naming the flag and what it accepts."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(one_line(model, exc)) from None


def command_line(model: BaseModel, *, command: str, head: tuple[str, ...] = (),
                 borrowed: Mapping[str, Flag] | None = None) -> str:
    """``model`` as the flags of ``gpuwise COMMAND`` that rebuild it: every flag field ``command`` takes whose value
    differs from its default (a switch as --name or its --no- form), after ``head`` (the model name, --gpu ...);
    a field the command refuses for the model's task (its answer does not depend on it) is left out; ``borrowed``
    spells the fields whose flag another model defines. Run as printed, the command gives the same figures."""
    parts = ["gpuwise", command, *head]
    task = str(getattr(model, "task", ""))
    # with --framework, a field the recipe fills would be filled again when the command runs: one the user gave
    # (``--ckpt none``) is spelled out even at its default
    recipe = frozenset(getattr(model, "recipe_fields", ()))
    for name, info in type(model).model_fields.items():
        flag = flag_of(info) or (borrowed or {}).get(name)  # a field whose flag another model defines (--quant)
        if flag is None or command not in flag.commands:
            continue
        value = getattr(model, name)
        at_default = value == info.get_default(call_default_factory=True)
        if value is None or (at_default and not (name in recipe and name in model.model_fields_set)):
            continue
        if flag.refused.get((command, task)):  # what the command decides itself, or ignores for this task
            continue
        spelled = flag.spelling(name)
        if isinstance(value, bool):
            parts.append(spelled if value else "--no-" + spelled.removeprefix("--"))
        elif isinstance(value, tuple):
            parts += [p for item in value for p in (spelled, str(item))]
        else:
            parts += [spelled, _text(value)]
    return " ".join(_quoted(p) for p in parts)


def _text(value: object) -> str:
    """A flag's value as typed: whole floats without '.0' (2e12 tokens, not 2000000000000.0)."""
    if isinstance(value, float) and value.is_integer():
        return f"{int(value)}" if abs(value) < 1e9 else f"{value:g}"
    return str(value)


def _quoted(part: str) -> str:
    return part if part and all(c.isalnum() or c in "-_./:,=+" for c in part) else repr(part)
