"""`flashfleet render`: the sglang commands of one recipe (shell, json or docker)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from flashfleet.cli.common import (
    UsageError,
    add_format,
    add_recipe_args,
    print_json,
    recipe_overrides,
)
from flashfleet.recipes import Recipe, render
from flashfleet.recipes.flags import argv_units

if TYPE_CHECKING:  # pydantic is imported on the docker path only
    from flashfleet.launch import ContainerLaunch


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", help="render the sglang commands of one recipe")
    add_recipe_args(p)
    add_format(p, "shell", "json", "docker")
    p.add_argument(
        "--image-version", default=None, help="SGLang release for --format docker (default: v0.5.23)"
    )
    p.add_argument(
        "--derived-image",
        action="store_true",
        help="--format docker: the derived image (Transformers pin, torchcodec) built by sglang_image",
    )
    p.add_argument(
        "--image-includes",
        action="append",
        default=[],
        metavar="'#PR'",
        help="--format docker: a PR the pinned build is known to contain (repeatable), e.g. '#42178'",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.format != "docker":
        image_flags = {
            "--image-version": args.image_version is not None,
            "--derived-image": args.derived_image,
            "--image-includes": bool(args.image_includes),
        }
        given = [flag for flag, on in image_flags.items() if on]
        if given:
            raise UsageError(f"{given[0]} applies to --format docker only (it names the container image)")
    recipe = render(args.hardware, args.strategy, args.topology, recipe_overrides(args))
    if args.format == "json":
        print_json(recipe.to_dict())
    elif args.format == "docker":
        print(docker_text(recipe, args.image_version, args.derived_image, args.image_includes), end="")
    else:
        print(shell_text(recipe), end="")
    return 0


def gpu_span(gpus: tuple[int, ...]) -> str:
    if not gpus:
        return "none"
    if len(gpus) > 1 and list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(map(str, gpus))


def _quoted(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def command_lines(argv: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """A copy-pasteable command: env assignments, then one flag (with its values) per line."""
    units = [_quoted(unit) for unit in argv_units(argv)]
    if env:
        units.insert(0, "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
    return units


def docker_lines(launch: ContainerLaunch) -> list[str]:
    """`docker run` and its options one per line (each flag with its value, as the launch groups
    them), then the image, then the container's command one flag (with its values) per line."""
    lines = ["docker run", *(_quoted(group) for group in launch.docker_options())]
    lines.append(shlex.quote(launch.image))
    return lines + [_quoted(unit) for unit in argv_units(launch.argv)]


def _continued(lines: list[str]) -> str:
    return " \\\n  ".join(lines)


def _header(recipe: Recipe) -> list[str]:
    return [
        f"# {recipe.hardware} / {recipe.strategy} / {recipe.topology}: {recipe.badge}",
        f"#   ({recipe.badge_source})",
    ]


def _process_header(name: str, node: int, gpus: tuple[int, ...], port: int, after: tuple[str, ...]) -> str:
    then = f", after {', '.join(after)}" if after else ""
    return f"# {name}: node {node}, GPUs {gpu_span(gpus)}, port {port}{then}"


def shell_text(recipe: Recipe) -> str:
    out = _header(recipe)
    for proc in recipe.start_order():
        out += ["", _process_header(proc.name, proc.node, proc.gpus, proc.port, proc.start_after)]
        out.append(_continued(command_lines(proc.argv, proc.env)))
    out += [""] + [f"# note: {note}" for note in recipe.notes]
    return "\n".join(out) + "\n"


def docker_text(recipe: Recipe, version: str | None, derived: bool, includes: list[str] | None = None) -> str:
    """Complete `docker run` commands in start order (pydantic is imported on this path only)."""
    from pydantic import ValidationError

    from flashfleet.launch import LaunchSettings, check_build_requirements, container_launches
    from flashfleet.stack.errors import plain_message
    from flashfleet.stack.image import ImageSpec

    fields: dict[str, object] = {"derived": derived, "includes": tuple(includes or ())}
    if version is not None:
        fields["version"] = version
    try:
        image = ImageSpec.model_validate(fields)
    except ValidationError as err:
        first = err.errors()[0]
        where = "--image-version" if first["loc"][:1] == ("version",) else "--image-includes"
        raise UsageError(f"{where}: {plain_message(first)}") from None
    check_build_requirements(recipe, image)
    out = _header(recipe)
    for launch in container_launches(recipe, LaunchSettings(image=image)):
        out += ["", _process_header(launch.name, launch.node, launch.gpus, launch.port, launch.start_after)]
        out.append(_continued(docker_lines(launch)))
    out += [""] + [f"# note: {note}" for note in recipe.notes]
    out.append("# note: the --env-file holds HF_TOKEN=...; keep it root-only (chmod 600)")
    return "\n".join(out) + "\n"
