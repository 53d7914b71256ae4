"""MkDocs hook: the configuration reference, generated from the code that reads it, so that it
cannot drift. ``docs/reference/configuration.md`` holds the prose; each marker in it is
replaced by a table made here:

* ``<!-- config:env -->``: every ``CORE_*`` variable, from the bullet lists of the module
  docstrings under ``backend/`` (``* ``CORE_X``: what it does``), which sit beside the code
  reading them; ``CORE_SERVER_*`` defaults come from ``ServerSettings`` itself.
  ``tests/docs/test_configuration_reference.py`` checks that every variable read in
  ``backend/`` has an entry.
* ``<!-- config:connect -->``: ``backend.connect()``'s options, from ``EngineConfig`` (in
  process), ``EngineSettings`` (in front of engines) and ``ConnectionSettings`` (the adapters'
  options), with their defaults and the variables ``from_env`` reads for them.
* ``<!-- config:cli -->``: the ``core-textmodels`` command's flags, from its argparse parser.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the checkout's backend, whichever one the venv installed
    sys.path.insert(0, str(ROOT))
BACKEND = ROOT / "backend"
PAGE = "reference/configuration.md"

#: A ``CORE_*`` name in code (names ending in ``_`` are prefixes, such as ``CORE_SERVER_``).
VARIABLE = re.compile(r"\bCORE_[A-Z0-9_]*[A-Z0-9]\b")
_BULLET = re.compile(r"^\* ((?:``CORE_[A-Z0-9_]+``(?:\s*/\s*)?)+):\s*(.*)$")

#: Sections of the variables' table, by the module whose docstring lists them; others follow.
_SECTIONS = {
    "backend": "Where requests go (every client and adapter)",
    "backend.backends.local.config": "In-process models and engines",
    "backend.backends.remote_engine.settings": "In front of OpenAI-compatible engines",
    "backend.server.auth": "Server keys",
    "backend.server.settings": "Server limits and behaviour",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _markdown(rst: str) -> str:
    return re.sub(r"``(.+?)``", r"`\1`", rst)


def documented_variables() -> dict[str, list[tuple[list[str], str]]]:
    """Module -> its docstring's ``CORE_*`` bullets as (names, description)."""
    found: dict[str, list[tuple[list[str], str]]] = {}
    for path in sorted(BACKEND.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        entries: list[tuple[list[str], str]] = []
        for line in docstring.splitlines():
            bullet = _BULLET.match(line)
            if bullet:
                entries.append((re.findall(r"CORE_[A-Z0-9_]+", bullet.group(1)), bullet.group(2)))
            elif entries and line.startswith("  ") and line.strip():
                names, text = entries[-1]
                entries[-1] = (names, f"{text} {line.strip()}")
            elif not line.strip() or line.startswith("*"):
                continue
            elif entries:
                break  # the list ended
        if entries:
            found[_module_name(path)] = entries
    return found


def variables_read() -> set[str]:
    """Every ``CORE_*`` name that appears in ``backend/``'s code (shipped test doubles
    included)."""
    names: set[str] = set()
    for path in BACKEND.rglob("*.py"):
        names.update(VARIABLE.findall(path.read_text(encoding="utf-8")))
    return names


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _server_defaults() -> dict[str, str]:
    from backend.server.settings import ENV_PREFIX, ServerSettings

    defaults = {}
    for f in dataclasses.fields(ServerSettings):
        if f.default is not dataclasses.MISSING and f.name not in ("api_keys", "no_auth"):
            defaults[ENV_PREFIX + f.name.upper()] = f"`{f.default!r}`"
    return defaults


def env_table() -> str:
    documented = documented_variables()
    server_defaults = _server_defaults()
    order = [m for m in _SECTIONS if m in documented] + sorted(set(documented) - set(_SECTIONS))
    out = []
    for module in order:
        out.append(f"\n### {_SECTIONS.get(module, module)}\n\nRead by `{module}`.\n")
        entries = documented[module]
        in_code = any(names[0] in server_defaults for names, _ in entries)
        header = "| variable | what it sets (and its default) |"
        out.append(header + (" default in code |" * in_code))
        out.append("|---|---|" + ("---|" * in_code))
        for names, text in entries:
            variables = " / ".join(f"`{n}`" for n in names)
            default = f" {server_defaults.get(names[0], '')} |" if in_code else ""
            out.append(f"| {variables} | {_cell(_markdown(text))} |{default}")
    return "\n".join(out) + "\n"


def _from_env_variables(cls: type) -> dict[str, str]:
    """Field -> the variable ``cls.from_env`` reads for it (``name=env.get("CORE_X")...``)."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(cls.from_env))
    variables = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg:
            names = VARIABLE.findall(ast.unparse(node.value))
            if names:
                variables[node.arg] = " / ".join(f"`{n}`" for n in names)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            # "profile = overrides.pop('profile') or env.get('CORE_MODEL_PROFILE')"
            names = VARIABLE.findall(ast.unparse(node.value))
            if names:
                variables[node.targets[0].id] = " / ".join(f"`{n}`" for n in names)
    return variables


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return f"`{f.default!r}`"
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f"`{f.default_factory()!r}`"  # type: ignore[misc]
    return "required"


def connect_tables() -> str:
    from backend import ConnectionSettings
    from backend.backends.local.config import EngineConfig
    from backend.backends.remote_engine.settings import _ENV, EngineSettings

    out = ["\n### In process: `backend.connect(**options)`\n"]
    out.append("`EngineConfig` fields; unknown names and values are refused at once.\n")
    out.append("| option | default | from the environment |")
    out.append("|---|---|---|")
    env = _from_env_variables(EngineConfig)
    for f in dataclasses.fields(EngineConfig):
        out.append(f"| `{f.name}` | {_default(f)} | {env.get(f.name, '')} |")

    out.append("\n### In front of engines: `backend.connect(engine_url=..., **options)`\n")
    out.append("`EngineSettings` fields.\n")
    out.append("| option | default | from the environment |")
    out.append("|---|---|---|")
    for f in dataclasses.fields(EngineSettings):
        variable = f"`{_ENV[f.name]}`" if f.name in _ENV else ""
        if f.name == "prefixes":
            variable = "`CORE_QUERY_PREFIX` / `CORE_PASSAGE_PREFIX`"
        out.append(f"| `{f.name}` | {_default(f)} | {variable} |")

    out.append("\n### Adapters and `backend.connect_shared()`: `ConnectionSettings`\n")
    out.append("Every LangChain and LlamaIndex class takes these options, with these defaults.\n")
    out.append("| option | default | description |")
    out.append("|---|---|---|")
    for name, info in ConnectionSettings.model_fields.items():
        if info.default_factory is not None:
            default = "from the environment"
        else:
            default = f"`{info.default!r}`"
        out.append(f"| `{name}` | {default} | {_cell(info.description or '')} |")
    return "\n".join(out) + "\n"


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:  # argparse keeps no public list of its arguments
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
        if action.default in (None, False, argparse.SUPPRESS) or action.required:
            default = "required" if action.required or not action.option_strings else ""
        else:
            default = f"`{action.default!r}`"
        choices = f" (one of: {', '.join(map(str, action.choices))})" if action.choices else ""
        rows.append(f"| {name} | {default} | {_cell((action.help or '') + choices)} |")
    return rows


def cli_tables() -> str:
    from backend.cli import build_parser

    parser = build_parser()
    out = ["\n### `core-textmodels`\n", "| flag | default | what it does |", "|---|---|---|"]
    out += _flags(parser)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in commands._choices_actions}
    for name, sub in commands.choices.items():
        out += [f"\n### `core-textmodels {name}`\n", f"{helps.get(name, '')}.\n"]
        out += ["| flag | default | what it does |", "|---|---|---|"] + _flags(sub)
    return "\n".join(out) + "\n"


def render(markdown: str) -> str:
    return (
        markdown.replace("<!-- config:env -->", env_table())
        .replace("<!-- config:connect -->", connect_tables())
        .replace("<!-- config:cli -->", cli_tables())
    )


def on_page_markdown(markdown: str, page, config, files) -> str:
    return render(markdown) if page.file.src_uri == PAGE else markdown
