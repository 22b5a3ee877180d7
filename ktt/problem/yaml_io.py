"""Reading YAML files within a budget, and turning pydantic errors into one-line ``FILE: FIELD: message`` errors.

Every YAML we read (problem.yaml, inputs.yaml, a model's tuning.yaml) is untrusted. PyYAML
alone lets 1 KB of aliases stand for gigabytes once something walks the value, and recurses
once per nesting level. So the loader here counts as it composes: the text is capped in size,
nesting in depth, aliases in number, and the value's size *as if expanded* is computed on the
node graph (shared nodes counted once per reference, never built) before anything is
constructed. Numbers are range-checked (integers within 64 bits, floats finite). Errors quote at
most a short prefix of anything, never an expanded value.
"""

from __future__ import annotations

import math
import reprlib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ktt.capped_read import MAX_YAML_BYTES, describe_read_error, read_text_capped
from ktt.problem.errors import ProblemError
from ktt.terminal_text import safe_text

M = TypeVar("M", bound=BaseModel)

_UNION_TAGS = {"scalar", "buffer", "ForbidEntry", "str", "int", "float", "list[int]", "list[str]"}

# The budget in force (docs/SECURITY.md, "Bounds").
MAX_YAML_DEPTH = 100  # nested mappings / sequences
MAX_YAML_ALIASES = 1_000  # *alias references in one file
MAX_YAML_NODES = 100_000  # values in the document, counting each alias reference as a full copy
YAML_INT_MIN = -(2**63)
YAML_INT_MAX = 2**64 - 1  # what fits in some 64-bit integer; fields narrow it further

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_HINT = "quote values that start with * & ! { [ or contain ': ' (e.g. size: '2 * N')"

_short_repr = reprlib.Repr()
_short_repr.maxlevel = 2
_short_repr.maxlist = _short_repr.maxtuple = _short_repr.maxdict = _short_repr.maxset = 4
_short_repr.maxstring = _short_repr.maxother = 60
_short_repr.maxlong = 30


def short_repr(value: Any) -> str:
    """A repr of at most a few dozen characters, whatever the value's size (for error messages)."""
    try:
        text = _short_repr.repr(value)
    except (ValueError, RecursionError, TypeError):
        text = f"<{type(value).__name__}>"
    return _one_line(text, 80)


def _one_line(text: str, limit: int) -> str:
    """At most ``limit`` characters on one line, control and bidi characters escaped."""
    text = safe_text(text[: limit + 1])
    return text if len(text) <= limit else text[: limit - 3] + "..."


class YamlBudgetError(yaml.MarkedYAMLError):
    """A document over the loader's budget (depth, aliases, expanded size, number range)."""


class _Budget(yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """The composer and constructor with a budget, over either parser (the composer only reads events).

    Also notes keys given twice in one mapping (PyYAML silently keeps the last).
    """

    def _start_budget(self) -> None:
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        yaml.composer.Composer.__init__(self)
        self.duplicates: list[tuple[str, int]] = []
        self._depth = 0
        self._aliases = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                mark = self.peek_event().start_mark
                raise YamlBudgetError(problem=f"more than {MAX_YAML_ALIASES:,} aliases", problem_mark=mark)
            return super().compose_node(parent, index)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            mark = self.peek_event().start_mark
            raise YamlBudgetError(problem=f"more than {MAX_YAML_NODES:,} values", problem_mark=mark)
        if self._depth >= MAX_YAML_DEPTH and self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            mark = self.peek_event().start_mark
            raise YamlBudgetError(problem=f"nested more than {MAX_YAML_DEPTH} levels deep", problem_mark=mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
                if key_node.value in seen:
                    self.duplicates.append((key_node.value, key_node.start_mark.line + 1))
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)

    def check_budget(self, root: yaml.Node) -> None:
        """Expanded size (without expanding), cycles, and number ranges, in one pass over the graph."""
        size: dict[int, int] = {}
        in_progress: set[int] = set()
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            key = id(node)
            if children_done:
                in_progress.discard(key)
                total = 1 + sum(size[id(c)] for c in _children(node))
                if total > MAX_YAML_NODES:
                    raise YamlBudgetError(
                        problem=f"more than {MAX_YAML_NODES:,} values once aliases are expanded",
                        problem_mark=node.start_mark,
                    )
                size[key] = total
                continue
            if key in size:
                continue
            if key in in_progress:
                raise YamlBudgetError(
                    problem="an alias refers to itself (a recursive value)", problem_mark=node.start_mark
                )
            if isinstance(node, yaml.ScalarNode):
                self._check_number(node)
                size[key] = 1
                continue
            in_progress.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node) if id(c) not in size)

    def _check_number(self, node: yaml.ScalarNode) -> None:
        if node.tag == _INT_TAG:
            if sum(c.isalnum() for c in node.value) > 80:  # int() of thousands of digits is slow, then refused
                value = None
            else:
                try:
                    value = self.construct_yaml_int(node)
                except (ValueError, IndexError, TypeError):  # '!!int ""', '!!int abc'
                    raise YamlBudgetError(
                        problem=f"{_one_line(node.value, 30)!r} is not an integer", problem_mark=node.start_mark
                    ) from None
            if value is None or not YAML_INT_MIN <= value <= YAML_INT_MAX:
                raise YamlBudgetError(
                    problem=f"integer {_one_line(node.value, 30)} does not fit in 64 bits", problem_mark=node.start_mark
                )
        elif node.tag == _FLOAT_TAG:
            try:
                number = self.construct_yaml_float(node)
            except (ValueError, IndexError, TypeError):  # '!!float ""', '!!float abc'
                raise YamlBudgetError(
                    problem=f"{_one_line(node.value, 30)!r} is not a number", problem_mark=node.start_mark
                ) from None
            if not math.isfinite(number):
                raise YamlBudgetError(
                    problem=f"{_one_line(node.value, 30)} is not a finite number", problem_mark=node.start_mark
                )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class _PyLoader(_Budget, yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """The pure-Python parser (PyYAML without libyaml)."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        self._start_budget()

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner looks ahead across a whole flow collection ([[[[...) before the composer
        # sees its first node, at a cost that grows with the square of the depth: stop it here.
        if self.flow_level >= MAX_YAML_DEPTH:
            mark = self.get_mark()
            raise YamlBudgetError(problem=f"nested more than {MAX_YAML_DEPTH} levels deep", problem_mark=mark)
        super().fetch_flow_collection_start(token_class)


try:  # libyaml's parser: about five times faster, with its own limit on flow nesting
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _Loader: type[_Budget] = _PyLoader
else:

    class _CLoader(_Budget, CParser):  # type: ignore[misc]
        """libyaml's scanner and parser under the Python composer."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            self._start_budget()

    _Loader = _CLoader


def _compose(text: str, loader_class: type[_Budget] | None = None) -> tuple[_Budget, yaml.Node | None]:
    loader = (loader_class or _Loader)(text)
    try:
        root = loader.get_single_node()
    except RecursionError:
        loader.dispose()
        raise YamlBudgetError(problem="nested too deeply") from None
    except BaseException:
        loader.dispose()
        raise
    if root is not None:
        try:
            loader.check_budget(root)
        except BaseException:
            loader.dispose()
            raise
    return loader, root


def _load(text: str) -> tuple[Any, list[tuple[str, int]]]:
    loader, root = _compose(text)
    try:
        if root is None:
            return None, []
        try:
            return loader.construct_document(root), loader.duplicates
        except (ValueError, TypeError, OverflowError, RecursionError, IndexError, KeyError, AttributeError) as exc:
            # e.g. a date that does not exist (2024-02-31), '!!float abc', a long merge chain
            raise YamlBudgetError(problem=f"cannot read a value: {_one_line(str(exc), 120)}") from None
    finally:
        loader.dispose()


def _syntax_error(path: Path, exc: yaml.YAMLError) -> ProblemError:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid YAML"])[0]
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):  # "expected a single document in the stream" + "but found ..."
        problem = f"{context}, {problem}"
    started = getattr(exc, "context_mark", None)
    if mark and started and started.line < mark.line and context:
        # A key without its ':', an unclosed [ { or quote: the mistake is where the construct began; the
        # scanner only notices on a later line (the next key, the end of the file).
        problem = f"{problem} ({context}, noticed on line {mark.line + 1})"
        where = f"line {started.line + 1}, column {started.column + 1}"
    if isinstance(exc, YamlBudgetError):
        return ProblemError(path, where, _one_line(problem, 200))
    return ProblemError(path, where, f"YAML syntax error: {_one_line(problem, 200)}", hint=_HINT)


def _check_size(text: str, path: Path) -> None:
    if len(text) > MAX_YAML_BYTES or len(text.encode("utf-8", errors="surrogatepass")) > MAX_YAML_BYTES:
        raise ProblemError(path, "", f"larger than the limit of {MAX_YAML_BYTES:,} bytes for a YAML file")


def read_yaml_text(path: Path) -> str:
    """The text of a YAML file, read within the size cap (regular files only); ProblemError otherwise."""
    try:
        return read_text_capped(path, MAX_YAML_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(path, "", describe_read_error(exc)) from None


def parse_yaml_mapping(text: str, path: Path | str, warnings: list[str] | None = None) -> dict[str, Any]:
    """Parse YAML text whose top level must be a mapping (errors name ``path``).

    A key given twice in one mapping is legal YAML for PyYAML (the last one wins), so older
    files that do it still load; it is reported in ``warnings`` when a list is passed.
    """
    path = Path(path)
    _check_size(text, path)
    try:
        data, duplicates = _load(text)
    except yaml.YAMLError as exc:
        raise _syntax_error(path, exc) from None
    if data is None:
        raise ProblemError(path, "(top level)", "the file is empty; expected a mapping of keys")
    if not isinstance(data, dict):
        raise ProblemError(path, "(top level)", f"expected a mapping of keys, got a {_kind(data)}")
    if warnings is not None:
        warnings += [
            f"{path.name}: line {line}: key {_one_line(key, 60)!r} is given twice; the last one wins"
            for key, line in duplicates
        ]
    return data


def read_yaml_mapping(path: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """Read and parse a YAML file whose top level must be a mapping (see ``parse_yaml_mapping``)."""
    return parse_yaml_mapping(read_yaml_text(path), path, warnings)


def yaml_value_lines(source: str | Path) -> dict[tuple[Any, ...], int]:
    """Key path -> 1-based line where that value starts, e.g. ``("args", 3, "body") -> 42``.

    Mapping keys appear as their text, sequence items by index; ``()`` is the document. Text
    that does not parse (or is over the budget) gives an empty mapping: this serves error
    reports, which must not fail in turn.
    """
    try:
        text = read_text_capped(source, MAX_YAML_BYTES) if isinstance(source, Path) else source
        if len(text) > MAX_YAML_BYTES:
            return {}
        loader, root = _compose(text)
        loader.dispose()
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    if root is None:
        return {}
    lines: dict[tuple[Any, ...], int] = {}
    seen: set[int] = set()  # an alias's value is listed where it is defined, not again at each reference
    stack: list[tuple[tuple[Any, ...], yaml.Node]] = [((), root)]
    while stack:
        key_path, node = stack.pop()
        if key_path in lines:
            continue
        lines[key_path] = node.start_mark.line + 1
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(((*key_path, i), child) for i, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
                    stack.append(((*key_path, key_node.value), value_node))
    return lines


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def field_path(loc: tuple[Any, ...], data: Any = None) -> str:
    """('args', 2, 'buffer', 'dtype') -> 'args[2] (B).dtype' (the arg's name when known)."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
            if isinstance(node, dict) and isinstance(node.get("name"), str):
                out += f" ({node['name']})"
            continue
        if part in _UNION_TAGS or str(part).startswith(("function-", "literal[")):
            continue
        out += f".{part}" if out else str(part)
        node = node.get(part) if isinstance(node, dict) else None
    return out or "(top level)"


def _message(err: dict[str, Any]) -> str:
    msg = str(err.get("msg", "invalid value"))
    kind = err.get("type", "")
    if msg.startswith("Value error, "):
        return msg[len("Value error, ") :]
    if kind == "missing":
        return "missing (required)"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "union_tag_not_found":
        return "missing 'kind' (must be scalar or buffer)"
    got = err.get("input")
    shows_input = kind in ("literal_error", "enum") or kind.startswith(("greater_than", "less_than"))
    if shows_input or kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{msg[0].lower()}{msg[1:]} (got {short_repr(got)})"
    return f"{msg[0].lower()}{msg[1:]}"


def validate_model(model: type[M], data: dict[str, Any], path: Path) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # For unions pydantic reports every branch; the first error is the most specific one.
        first = errors[0]
        raise ProblemError(path, field_path(tuple(first["loc"]), data), _message(dict(first))) from None
