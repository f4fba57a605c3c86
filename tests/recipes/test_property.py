"""Random option sets: either a render or a clean refusal that names the option and a real rule,
never another exception; and the combinations known to work (the shipped stacks' recipes, the
badge catalog's cells and measured variants) render, whatever else a rule refuses."""

import inspect
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import budget

from flashfleet import catalog
from flashfleet.catalog import CHECKPOINTS, hardware_catalog
from flashfleet.recipes import OPTION_DEFS, STRATEGIES, TOPOLOGIES, RecipeError, render
from flashfleet.recipes.flags import argv_units
from flashfleet.recipes.rules import RULES
from flashfleet.stack import DEFAULT_STACKS_DIR

# Refusals of a value on its own (options.py, render.py), by rule: they blame an option that was given.
VALUE_RULES = {"type", "choices", "range", "unknown-option"}
# The combination rules (rules.py) blame the option their table names; render.py adds one of its own.
COMBINATION_RULES = {rule.id: rule.option for rule in RULES} | {"extra-args-repeat": "extra_args"}


def _value(name: str) -> st.SearchStrategy[object]:
    d = OPTION_DEFS[name]
    if d.choices:
        return st.sampled_from([*d.choices, "bogus", True, False])
    if d.kind == "int":
        return st.one_of(st.integers(-2, 20), st.sampled_from(["auto", "x", "3"]))
    if d.kind == "float":
        return st.one_of(
            st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["auto", "1.5", "nan"])
        )
    if d.kind == "argv":
        words = st.sampled_from(
            [
                "--enable-metrics",
                "--disable-radix-cache",
                "--tp-size",
                "8",
                "--json-model-override-args",
                '{"linear_lower_bound": 1}',
                "{}",
                "x",
            ]
        )
        return st.one_of(st.lists(words, max_size=4), st.text(max_size=12))
    return st.one_of(st.none(), st.text(max_size=40), st.sampled_from(["nvidia/GLM-5.3-Flash-NVFP4"]))


overrides = st.dictionaries(st.sampled_from(sorted(OPTION_DEFS)), st.deferred(lambda: st.just(None))).flatmap(
    lambda keys: st.fixed_dictionaries({k: _value(k) for k in keys})
)


def assert_names_a_real_rule(refusal: RecipeError, options: dict[str, object]) -> None:
    assert refusal.message
    if refusal.rule in VALUE_RULES:
        assert refusal.field in options, refusal  # the value given, not another option
    else:
        assert refusal.rule in COMBINATION_RULES, refusal
        assert refusal.field == COMBINATION_RULES[refusal.rule], refusal
        assert refusal.message.startswith(f"{refusal.field}: "), refusal


def assert_sound(recipe) -> None:
    for proc in recipe.processes:
        assert all(isinstance(w, str) and w for w in proc.argv)
        units = [u[0] for u in argv_units(proc.argv)[1:]]
        # The router names one worker per --prefill/--decode (PD across nodes); nothing else repeats.
        once = [u for u in units if not (proc.role == "router" and u in ("--prefill", "--decode"))]
        assert len(once) == len(set(once)), f"duplicate flag in {proc.argv}"
        assert "--disable-radix-cache" not in proc.argv
    recipe.start_order()  # no cycle


@settings(max_examples=budget(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hardware=st.sampled_from(sorted(hardware_catalog())),
    strategy=st.sampled_from(sorted(STRATEGIES)),
    topology=st.sampled_from(sorted(TOPOLOGIES)),
    options=overrides,
)
def test_render_or_clean_refusal(hardware, strategy, topology, options):
    try:
        recipe = render(hardware, strategy, topology, options)
    except RecipeError as err:
        refusal = err
    else:
        refusal = None
    if refusal is not None:
        assert_names_a_real_rule(refusal, options)
        return
    assert_sound(recipe)


def _known_valid() -> list[tuple[str, str, str, dict[str, object]]]:
    """(hardware, strategy, topology, options) that are known to run: read from the files, not
    from the engine."""
    out = []
    for path in sorted(DEFAULT_STACKS_DIR.glob("Pulumi.*.yaml")):
        spec = yaml.safe_load(path.read_text())["config"]["flashfleet:stack"]
        recipe = spec.get("recipe", spec)
        out.append((recipe["hardware"], recipe["strategy"], recipe["topology"], recipe.get("options") or {}))
    badges = tomllib.loads((Path(catalog.__file__).parent / "badges.toml").read_text())
    for entry in [*badges["cell"], *badges.get("measured", [])]:
        out.append((entry["hardware"], entry["strategy"], entry["topology"], entry.get("options", {})))
    return out


KNOWN_VALID = _known_valid()


@pytest.mark.parametrize(("hardware", "strategy", "topology", "options"), KNOWN_VALID)
def test_a_combination_known_to_work_renders(
    hardware: str, strategy: str, topology: str, options: dict[str, object]
) -> None:
    assert_sound(render(hardware, strategy, topology, options))


def _valid_value(name: str) -> st.SearchStrategy[object]:
    """A value the option takes on its own: a refusal can then only be a combination rule's."""
    d = OPTION_DEFS[name]
    if d.choices:
        return st.sampled_from(d.choices)
    if name == "checkpoint":
        return st.sampled_from([c for cs in CHECKPOINTS.values() for c in cs])
    if d.kind == "int":
        return st.integers(int(d.minimum or 0), 16)
    return st.floats(0.01, 0.9)  # mamba_full_memory_ratio: a share of memory


@settings(max_examples=budget(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(KNOWN_VALID),
    changes=st.dictionaries(
        st.sampled_from(sorted(n for n in OPTION_DEFS if n != "extra_args")), st.just(None), max_size=2
    ).flatmap(lambda keys: st.fixed_dictionaries({k: _valid_value(k) for k in keys})),
)
def test_valid_values_on_a_working_combination_render_or_break_a_combination_rule(base, changes):
    hardware, strategy, topology, options = base
    try:
        recipe = render(hardware, strategy, topology, {**options, **changes})
    except RecipeError as err:
        refusal = err
    else:
        assert_sound(recipe)
        return
    assert refusal.rule in COMBINATION_RULES, refusal  # never a value rule: each value is one it takes
    assert_names_a_real_rule(refusal, {**options, **changes})


# What each rule's own code reads of the options (`c.options.tp`, `o.tp`): read from its source,
# not from what it decides.
RULE_READS = {
    rule.id: set(re.findall(r"\.(\w+)\b", inspect.getsource(rule.broken))) & set(OPTION_DEFS)
    for rule in RULES
}


@settings(max_examples=budget(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(KNOWN_VALID),
    name=st.sampled_from(sorted(n for n in OPTION_DEFS if n != "extra_args")),
    data=st.data(),
)
def test_one_valid_change_to_a_working_combination_is_refused_only_by_a_rule_that_reads_it(base, name, data):
    """The combination worked before the change, so a refusal is the change's: by a rule that
    reads the option changed. A rule that refuses a valid value of an option it never looks at
    refuses a working combination."""
    hardware, strategy, topology, options = base
    value = data.draw(_valid_value(name))
    try:
        render(hardware, strategy, topology, {**options, name: value})
        return
    except RecipeError as err:
        refusal = err
    assert refusal.rule in RULE_READS, refusal  # a combination rule, never a value rule
    assert name in RULE_READS[refusal.rule], (name, value, refusal)


def test_each_rule_reads_the_option_it_blames() -> None:
    # the source scan above finds what a rule reads: each reads at least the option it blames
    # (`topology` is not an option; the extra_args rules read it through a helper)
    blaming = [r for r in RULES if r.option in OPTION_DEFS and r.option != "extra_args"]
    assert len(blaming) >= 15
    assert {r.id: r.option for r in blaming if r.option not in RULE_READS[r.id]} == {}
