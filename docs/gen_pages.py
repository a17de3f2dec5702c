"""Pages generated at build time (mkdocs-gen-files), so that nothing here can drift from the code.

* ``notebooks/*.ipynb``: the section notebooks as stored in git (with their outputs), rendered by mkdocs-jupyter,
  which is configured never to execute them;
* ``results/figures/*.png``: the figures of the committed CPU-scale run (``artifacts/cpu/figures``);
* ``reference/cli.md``: every ``papa`` subcommand and option, read off ``papa.cli.build_parser()``;
* ``reference/<layer>.md``: the API reference of every module of each layer (mkdocstrings reads the docstrings).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import mkdocs_gen_files

from papa.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
# The package's layers, bottom to top (docs/architecture.md; tests/unit/test_layering.py enforces the order).
LAYERS = ("core", "method", "tasks", "probing", "runs", "paper", "sections", "reproduce")
# Members left out of the API reference, with why. `PapaController.head_modes`'s docstring writes [layer][head],
# which Markdown reads as a link to a missing target (a strict-build error); drop the entry once it is quoted there.
HIDDEN = {"papa.method.controller": ["head_modes"]}


def copy_tree(source: Path, pattern: str, target: str) -> None:
    for path in sorted(source.glob(pattern)):
        with mkdocs_gen_files.open(f"{target}/{path.name}", "wb") as f:
            f.write(path.read_bytes())


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()  # argparse exposes no public way to list a parser's arguments
    rows = ["| argument | default | description |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        if action.option_strings and action.nargs != 0:
            name += f" `{action.metavar or action.dest.upper()}`" + (" …" if action.nargs in ("+", "*") else "")
        help_text = formatter._expand_help(action) if action.help else ""
        if action.choices and "choices" not in help_text.lower():
            help_text += f" (one of: {', '.join(map(str, action.choices))})"
        if action.required:
            default = "required"
        elif action.default in (None, False) or action.default is argparse.SUPPRESS:
            default = ""
        else:
            default = f"`{' '.join(map(str, action.default)) if isinstance(action.default, list) else action.default}`"
        rows.append(f"| {name} | {default} | {_cell(help_text)} |")
    return rows


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """The whole command line as Markdown: the top-level usage, then one section per subcommand."""
    lines = ["# Command-line reference", "",
             "Generated from `papa.cli.build_parser()` at every build, so it is always the installed `papa`'s "
             "(the same text as `papa COMMAND --help`). The [command line](../cli.md) page shows the commands at work.",
             "", "```text", parser.format_usage().strip(), "```", "", _cell(parser.description or ""), ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {a.dest: a.help for a in sub._choices_actions}
    for name, command in sub.choices.items():
        lines += [f"## papa {name}", "", _cell(summaries.get(name) or ""), ""]
        if command.description:
            lines += [_cell(command.description), ""]
        lines += ["```text", command.format_usage().strip(), "```", "", *_option_rows(command), ""]
    return "\n".join(lines)


def api_reference(layer: str) -> str:
    package = REPO / "papa" / layer
    modules = sorted(p for p in package.rglob("*.py") if p != package / "__init__.py")
    lines = [f"# papa.{layer}", "", f"::: papa.{layer}", "    options:", "      show_root_heading: false",
             "      members: false", ""]
    for path in modules:
        dotted = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        lines += [f"::: {dotted}"]
        if path.name == "__init__.py":  # a subpackage (papa.paper.claims): its map; its names render under its modules
            lines += ["    options:", "      members: false"]
        elif dotted in HIDDEN:
            lines += ["    options:", "      filters:", '        - "!^_"', *(f'        - "!^{name}$"' for name in HIDDEN[dotted])]
        lines.append("")
    return "\n".join(lines)


copy_tree(REPO / "notebooks", "*.ipynb", "notebooks")
copy_tree(REPO / "artifacts" / "cpu" / "figures", "*.png", "results/figures")
with mkdocs_gen_files.open("reference/cli.md", "w") as f:
    f.write(cli_reference(build_parser()))
with mkdocs_gen_files.open("reference/papa.md", "w") as f:
    f.write("# papa\n\nThe names `import papa` gives (each imported lazily from its layer).\n\n::: papa\n"
            "    options:\n      show_root_heading: false\n")
for layer in LAYERS:
    with mkdocs_gen_files.open(f"reference/{layer}.md", "w") as f:
        f.write(api_reference(layer))
