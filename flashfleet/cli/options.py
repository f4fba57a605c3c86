"""`flashfleet options`: the recipe options with their values and defaults."""

from __future__ import annotations

import argparse

from flashfleet.cli.common import add_format, print_json
from flashfleet.recipes.options import OPTION_DEFS
from flashfleet.recipes.render import default_text
from flashfleet.table import markdown


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("options", help="list the recipe options, their values and defaults")
    add_format(p, "text", "json", "markdown")
    p.set_defaults(func=run)


def _values(kind: str, choices: tuple[str, ...], nullable: bool) -> str:
    if choices:
        return " | ".join(choices)
    text = {"int": "integer", "float": "number", "str": "text", "argv": "list of words"}[kind]
    return f"{text} or auto" if nullable else text


def run(args: argparse.Namespace) -> int:
    rows = [
        {
            "name": d.name,
            "values": _values(d.kind, d.choices, d.nullable),
            "default": default_text(d.name),
            "help": d.help,
        }
        for d in OPTION_DEFS.values()
    ]
    if args.format == "json":
        print_json(rows)
    elif args.format == "markdown":
        cells = [[f"`{r['name']}`", r["values"], r["default"], r["help"]] for r in rows]
        print("\n".join(markdown(("option", "values", "default", "effect"), cells)))
    else:
        for r in rows:
            print(f"{r['name']:<25} {r['values']}\n{'':<25} default: {r['default']}; {r['help']}")
    return 0
