"""Random option sets: either a render or a clean refusal, never another exception."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import budget

from flashfleet.catalog import hardware_catalog
from flashfleet.recipes import OPTION_DEFS, STRATEGIES, TOPOLOGIES, RecipeError, render
from flashfleet.recipes.flags import argv_units


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
        assert refusal.field
        assert refusal.rule
        assert refusal.message
        return
    for proc in recipe.processes:
        assert all(isinstance(w, str) and w for w in proc.argv)
        units = [u[0] for u in argv_units(proc.argv)[1:]]
        # The router names one worker per --prefill/--decode (PD across nodes); nothing else repeats.
        once = [u for u in units if not (proc.role == "router" and u in ("--prefill", "--decode"))]
        assert len(once) == len(set(once)), f"duplicate flag in {proc.argv}"
        assert "--disable-radix-cache" not in proc.argv
    recipe.start_order()  # no cycle
