"""How strong the fast tier is: one realistic one-line bug at a time, then the fast tests nearest to it.

Each mutant below replaces one text inside one function (the text must occur exactly once there),
runs `pytest -m "not slow"` on the tests named for it, and restores the file, whatever happens.
A mutant is killed when a test fails, survives when all pass, and is reported broken when pytest
could not run (a collection error): broken mutants are a fault of this list, not of the tests.

    uv run --frozen --no-sync python scripts/mutation_check.py            # all mutants
    uv run --frozen --no-sync python scripts/mutation_check.py --list     # their names
    uv run --frozen --no-sync python scripts/mutation_check.py NAME ...   # some of them

Exit status: 0 when every mutant was killed, 1 when one survived, 2 on a broken mutant or an
unknown name. The working tree must be clean of changes to the mutated files (a mutant's text is
looked for in the file as it stands, and the file is restored to exactly that).
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the fast tier, in one process, stopping at the first failure
PYTEST = ("-q", "-x", "-m", "not slow", "-n", "0", "-p", "no:cacheprovider")


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # under the repository root
    function: str  # `name` or `Class.name`
    old: str
    new: str
    tests: tuple[str, ...]


def m(name: str, path: str, function: str, old: str, new: str, *tests: str) -> Mutant:
    return Mutant(name, path, function, old, new, tests)


RV = "flashfleet/bringup/role_vars.py"
RV_TESTS = ("tests/bringup/test_role_vars.py", "tests/bringup/test_inert_vars.py")
SV = "flashfleet/stack/safe_values.py"
MUTANTS: list[Mutant] = [
    # --- the five survivors the first measurement found -----------------------------------------
    m("role_vars.no-rule-accepts", RV, "_by_type", "return kind, _no_rule", "return kind, None", *RV_TESTS),
    m("role_vars.template-braces-only", RV, "_inert", '("{{", "{%", "{#")', '("{{",)', *RV_TESTS),
    m(
        "check_lock.missing-repository-passes",
        "flashfleet/planning/checks.py",
        "check_lock",
        "if lock is None or r not in lock.weights",
        "if lock is None",
        "tests/stacks/test_image_lock.py",
    ),
    m(
        "validity.no-zero-text-check",
        "flashfleet/bench/validity.py",
        "refusal",
        "if summary.total_output_tokens_retokenized == 0:",
        "if False:",
        "tests/bench/test_validity.py",
    ),
    m(
        "redaction.no-urlsafe-base64",
        "flashfleet/bringup/redaction.py",
        "_base64_forms",
        "(base64.b64encode, base64.urlsafe_b64encode)",
        "(base64.b64encode,)",
        "tests/unit/test_redaction.py",
    ),
    # --- role arguments (bringup) -------------------------------------------------------------
    m("role_vars.ansible-vars-pass", RV, "check_role_vars", 'name.startswith("ansible_") or ', "", *RV_TESTS),
    m("role_vars.refused-names-pass", RV, "check_role_vars", "if name in REFUSED:", "if False:", *RV_TESTS),
    m("role_vars.port-no-ceiling", SV, "port", "not 0 < value < 65536", "not 0 < value", *RV_TESTS),
    m("role_vars.url-any-scheme", SV, "url", 'parts.scheme not in {"http", "https"} or ', "", *RV_TESTS),
    m("role_vars.word-climbs", RV, "word", ' or "/.." in value', "", *RV_TESTS),
    m(
        "role_vars.bool-as-int",
        RV,
        "_typed",
        'isinstance(value, bool) != (kind == "bool") or ',
        "",
        *RV_TESTS,
    ),
    m(
        "role_vars.url-credentials-pass",
        RV,
        "_inert",
        'and "@" in urlsplit(s).netloc',
        "and False",
        *RV_TESTS,
    ),
    # --- the site section (stack): what a stack sets for the roles ---------------------------------
    m(
        "site.one-index-for-the-weights-only",
        "flashfleet/stack/site.py",
        "Site.role_args",
        '"sglang_image_pip_index_url": pip.index_url,',
        "",
        "tests/unit/test_site_args.py",
    ),
    m(
        "site.url-credentials-pass",
        SV,
        "url",
        'if "@" in parts.netloc:',
        "if False:",
        "tests/bringup/test_role_vars.py",
    ),
    m(
        "site.token-over-http-dropped",
        "flashfleet/stack/site.py",
        "Site.role_args",
        '"model_weights_hf_token_over_http": hub.token_over_http or None,',
        "",
        "tests/bringup/test_role_vars.py",
        "tests/unit/test_site_args.py",
    ),
    # --- safe values (stack) ----------------------------------------------------------------------
    m(
        "safe_values.host-path-climbs",
        SV,
        "host_path",
        'if ".." in parts:',
        "if False:",
        "tests/bringup/test_role_vars.py",
    ),
    m(
        "safe_values.host-path-hidden",
        SV,
        "host_path",
        'if any(p.startswith(".") for p in parts):',
        "if False:",
        "tests/bringup/test_role_vars.py",
    ),
    m(
        "safe_values.host-path-root-itself",
        SV,
        "host_path",
        'path.startswith(root + "/")',
        "path.startswith(root)",
        "tests/bringup/test_role_vars.py",
    ),
    m("safe_values.address-scoped", SV, "host_address", 'if "%" in value:', "if False:", "tests/stacks"),
    m(
        "safe_values.pinned-image-floats",
        SV,
        "pinned_image",
        "if not digest and (not tag or FLOATING_TAG.search(tag)):",
        "if not digest and not tag:",
        "tests/stacks",
    ),
    m(
        "safe_values.dsa-key",
        SV,
        "ssh_public_key",
        "if isinstance(key, dsa.DSAPublicKey):",
        "if False:",
        "tests/stacks",
    ),
    # --- redaction --------------------------------------------------------------------------------
    m(
        "redaction.base64-offsets",
        "flashfleet/bringup/redaction.py",
        "_base64_forms",
        "for offset in range(3):",
        "for offset in range(1):",
        "tests/unit/test_redaction.py",
    ),
    m(
        "redaction.url-forms-upper-only",
        "flashfleet/bringup/redaction.py",
        "_url_forms",
        "return out | {",
        "return out or {",
        "tests/unit/test_redaction.py",
    ),
    # --- bench ------------------------------------------------------------------------------------
    m(
        "validity.all-failed-passes",
        "flashfleet/bench/validity.py",
        "refusal",
        "if summary.completed == 0:",
        "if False:",
        "tests/bench/test_validity.py",
    ),
    m(
        "validity.partial-failure-passes",
        "flashfleet/bench/validity.py",
        "refusal",
        "if summary.completed < expected:",
        "if summary.completed < expected - 1:",
        "tests/bench/test_validity.py",
    ),
    m(
        "validity.zero-tokens-passes",
        "flashfleet/bench/validity.py",
        "refusal",
        "if summary.total_output_tokens <= 0:",
        "if summary.total_output_tokens < 0:",
        "tests/bench/test_validity.py",
    ),
    # --- recipes ----------------------------------------------------------------------------------
    m(
        "rules.tp-exceeds-gpus",
        "flashfleet/recipes/rules.py",
        "_tp_fits",
        "if o.tp > total:",
        "if o.tp > total + 8:",
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    m(
        "rules.pd-needs-more-gpus",
        "flashfleet/recipes/rules.py",
        "_tp_fits",
        "if need > hw.gpus_per_node:",
        "if need > 2 * hw.gpus_per_node:",
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    m(
        "rules.pd-replicas",
        "flashfleet/recipes/rules.py",
        "_pd_replicas",
        "c.options.replicas > 1 and ",
        "",
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    m(
        "rules.pd-tp-differs",
        "flashfleet/recipes/rules.py",
        "_pd_same_tp",
        "if o.pd_decode_tp != o.tp:",
        "if False:",
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    m(
        "rules.cuda-vmm-single-node",
        "flashfleet/recipes/rules.py",
        "_cuda_vmm",
        " and c.options.nodes > 1",
        "",
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    m(
        "rules.hicache-size-wrongly-refused",
        "flashfleet/recipes/rules.py",
        "_hicache_size",
        'c.options.hicache == "off"',
        'c.options.hicache != "l1l2l3"',
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    m(
        "rules.pd-same-tp-refuses-equal",
        "flashfleet/recipes/rules.py",
        "_pd_same_tp",
        "if o.pd_decode_tp != o.tp:",
        "if o.pd_decode_tp >= o.tp:",
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    m(
        "rules.prefetch-threads-always",
        "flashfleet/recipes/rules.py",
        "_prefetch_threads",
        ' and c.options.weight_prefetch == "off"',
        "",
        "tests/recipes/test_rules.py",
        "tests/recipes/test_property.py",
    ),
    # --- capacity ---------------------------------------------------------------------------------
    m(
        "offers.any-hours-past-two-weeks",
        "flashfleet/capacity/offers.py",
        "check_hours",
        " or (hours > 14 * DAY and hours % WEEK)",
        "",
        "tests/capacity/test_buy_property.py",
        "tests/capacity/test_offers_buy.py",
    ),
    m(
        "offers.no-ceiling",
        "flashfleet/capacity/offers.py",
        "check_hours",
        "hours > MAX_HOURS or ",
        "",
        "tests/capacity/test_buy_property.py",
        "tests/capacity/test_offers_buy.py",
    ),
    m(
        "offers.partial-days",
        "flashfleet/capacity/offers.py",
        "check_hours",
        " or hours % DAY",
        "",
        "tests/capacity/test_buy_property.py",
        "tests/capacity/test_offers_buy.py",
    ),
]

# The working tree's files are changed in place: restore them even on Ctrl-C.
_PENDING: dict[Path, str] = {}


def function_span(tree: ast.Module, qualified: str) -> tuple[int, int]:
    """The function's lines (1-based, inclusive), found by `name` or `Class.name`."""
    body: list[ast.stmt] = tree.body
    *outer, last = qualified.split(".")
    for part in outer:
        body = next(n.body for n in body if isinstance(n, ast.ClassDef) and n.name == part)
    node = next(n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == last)
    return node.lineno, node.end_lineno or node.lineno


def mutate(source: str, mutant: Mutant) -> str:
    lines = source.splitlines(keepends=True)
    first, last = function_span(ast.parse(source), mutant.function)
    body = "".join(lines[first - 1 : last])
    if body.count(mutant.old) != 1:
        raise ValueError(
            f"{mutant.name}: {mutant.old!r} occurs {body.count(mutant.old)} times in {mutant.function}"
        )
    return "".join(lines[: first - 1]) + body.replace(mutant.old, mutant.new) + "".join(lines[last:])


def run(mutant: Mutant) -> tuple[str, str]:
    """(verdict, the first failing test or pytest's last line)."""
    path = ROOT / mutant.path
    original = path.read_text()
    mutated = mutate(original, mutant)
    _PENDING[path] = original
    try:
        path.write_text(mutated)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *PYTEST, *mutant.tests],
            check=False,
            cwd=ROOT,
            capture_output=True,
            text=True,
            # the fast tier's quarter of each property test's examples (tests/property_budget.py)
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "FLASHFLEET_FAST_TIER": "1"},
        )
    finally:
        path.write_text(original)
        del _PENDING[path]
    verdict = {0: "survived", 1: "killed"}.get(proc.returncode, f"broken (pytest exit {proc.returncode})")
    lines = proc.stdout.splitlines()
    failed = [ln.removeprefix("FAILED ") for ln in lines if ln.startswith("FAILED ")]
    return verdict, (failed or lines[-1:] or [""])[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    by_name = {mu.name: mu for mu in MUTANTS}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        print(f"mutation_check: unknown mutant {unknown[0]!r} (see --list)", file=sys.stderr)
        return 2
    chosen = [by_name[n] for n in args.names] or MUTANTS
    if args.list:
        for mu in chosen:
            print(f"{mu.name}\t{mu.path}:{mu.function}")
        return 0
    results: dict[str, str] = {}
    try:
        for mu in chosen:
            start = time.monotonic()
            results[mu.name], why = run(mu)
            print(f"{results[mu.name]:<9} {mu.name} ({time.monotonic() - start:.0f} s): {why}", flush=True)
    finally:
        for path, text in _PENDING.items():
            path.write_text(text)
    killed = sum(r == "killed" for r in results.values())
    counted = sum(r in ("killed", "survived") for r in results.values())
    print(f"killed {killed} of {counted} ({100 * killed / max(counted, 1):.0f}%)")
    if counted < len(results):
        return 2
    return 0 if killed == counted else 1


if __name__ == "__main__":
    sys.exit(main())
