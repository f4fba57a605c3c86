"""`flashfleet render`: the sglang commands of one recipe."""

from __future__ import annotations

import argparse
import shlex

from flashfleet.cli.common import add_format, add_recipe_args, print_json, recipe_overrides
from flashfleet.recipes import Recipe, render


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", help="render the sglang commands of one recipe")
    add_recipe_args(p)
    add_format(p, "shell", "json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    recipe = render(args.hardware, args.strategy, args.topology, recipe_overrides(args))
    if args.format == "json":
        print_json(recipe.to_dict())
    else:
        print(shell_text(recipe), end="")
    return 0


def gpu_span(gpus: tuple[int, ...]) -> str:
    if not gpus:
        return "none"
    if list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}" if len(gpus) > 1 else str(gpus[0])
    return ",".join(map(str, gpus))


def command_lines(argv: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """A copy-pasteable command: env assignments, then one flag (with its values) per line."""
    from flashfleet.recipes.flags import argv_units

    units = [" ".join(shlex.quote(w) for w in unit) for unit in argv_units(argv)]
    if env:
        units.insert(0, "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
    return [u + " \\" for u in units[:-1]] + [units[-1]]


def shell_text(recipe: Recipe) -> str:
    out = [
        f"# {recipe.hardware} / {recipe.strategy} / {recipe.topology}: {recipe.badge}",
        f"#   ({recipe.badge_source})",
    ]
    for proc in recipe.start_order():
        after = f", after {', '.join(proc.start_after)}" if proc.start_after else ""
        out.append("")
        out.append(f"# {proc.name}: node {proc.node}, GPUs {gpu_span(proc.gpus)}, port {proc.port}{after}")
        lines = command_lines(proc.argv, proc.env)
        out.append(lines[0])
        out.extend("  " + line for line in lines[1:])
    if recipe.notes:
        out.append("")
        out.extend(f"# note: {note}" for note in recipe.notes)
    return "\n".join(out) + "\n"
