"""Each option is declared once, as a field of ``Options``: its definition, its hardware-layer
default and the default shown to people are derived from that field, never written again."""

from dataclasses import fields

import pytest

from flashfleet.catalog import hardware_catalog
from flashfleet.recipes import OPTION_DEFS, STRATEGIES, TOPOLOGIES, Options, resolve
from flashfleet.recipes.options import BY_STRATEGY, hardware_layer
from flashfleet.recipes.render import default_text

CELLS = [
    (hw.id, strategy, topology)
    for hw in hardware_catalog().values()
    for strategy in STRATEGIES
    for topology in TOPOLOGIES
    if topology in hw.topologies
]


def test_definitions_are_the_fields_of_options_in_order():
    assert list(OPTION_DEFS) == [f.name for f in fields(Options)]


@pytest.mark.parametrize(
    ("name", "kind", "nullable"),
    [
        ("precision", "choice", False),
        ("checkpoint", "str", True),
        ("hicache_size", "int", True),
        ("tp", "int", False),
        ("mamba_full_memory_ratio", "float", True),
        ("extra_args", "argv", False),
    ],
)
def test_kind_and_nullable_come_from_the_field_type(name, kind, nullable):
    definition = OPTION_DEFS[name]
    assert (definition.kind, definition.nullable) == (kind, nullable)


def test_every_strategy_sets_the_options_without_a_hardware_default():
    by_strategy = {d.name for d in OPTION_DEFS.values() if d.default is BY_STRATEGY}
    assert by_strategy  # speculative, at least
    for strategy, layer in STRATEGIES.items():
        assert by_strategy <= set(layer), strategy


@pytest.mark.parametrize(("hardware", "strategy", "topology"), CELLS)
def test_the_cell_defaults_are_the_declared_layers(hardware, strategy, topology):
    # resolve has no default table of its own: an option no strategy or topology layer sets
    # takes exactly the value its field declares for the hardware.
    hw = hardware_catalog()[hardware]
    _, cell = resolve(hardware, strategy, topology)
    layered = {**STRATEGIES[strategy], **TOPOLOGIES[topology].defaults(hw)}
    for name, value in hardware_layer(hw).items():
        if name not in layered:
            assert getattr(cell, name) == value, name


@pytest.mark.parametrize(("hardware", "strategy", "topology"), CELLS)
def test_the_default_shown_names_every_cell_value(hardware, strategy, topology):
    # `flashfleet options` (and the README table) derive the default text from the same layers.
    _, cell = resolve(hardware, strategy, topology)
    for name, definition in OPTION_DEFS.items():
        value = getattr(cell, name)
        shown = definition.unset if value in (None, ()) else str(value)
        assert shown in default_text(name), (name, value)


def test_a_hardware_dependent_topology_default_is_shown_per_hardware():
    # PD takes half a node's GPUs per role: 2 on GB300, 4 on H200.
    assert "pd gb300 2, h200 4" in default_text("tp")
