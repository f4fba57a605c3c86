"""The site section is the one place that says which role arguments a stack sets: each field
reaches every role that reads it (one pip index for every pip the nodes run), and an empty
section sets nothing, so the roles keep their own defaults."""

from __future__ import annotations

from typing import Any

import pytest

from flashfleet.stack.site import Site


def test_an_empty_site_sets_no_role_argument() -> None:
    assert Site().role_args() == {}


@pytest.mark.parametrize(
    ("site", "args"),
    [
        ({"pip": {"indexUrl": "http://10.0.0.1/simple"}},
         {"model_weights_pip_index_url": "http://10.0.0.1/simple", "sglang_image_pip_index_url": "http://10.0.0.1/simple"}),
        ({"pip": {"findLinks": "/opt/flashfleet/wheels", "trustedHost": "10.0.0.1:8080"}},
         {"model_weights_pip_find_links": "/opt/flashfleet/wheels", "sglang_image_pip_find_links": "/opt/flashfleet/wheels",
          "model_weights_pip_trusted_host": "10.0.0.1:8080", "sglang_image_pip_trusted_host": "10.0.0.1:8080"}),
        ({"apt": {"ubuntuSnapshots": "http://10.0.0.1/snapshots", "dockerVersion": "29.1.3"}},
         {"sglang_image_apt_archive": "http://10.0.0.1/snapshots", "container_runtime_docker_version": "29.1.3"}),
        ({"hub": {"endpoint": "http://10.0.0.1:9000"}}, {"model_weights_hf_endpoint": "http://10.0.0.1:9000"}),
        ({"hub": {"tokenOverHttp": False}}, {}),  # the role's own default: no token over http
        ({"registryMirrors": ["https://r.example.internal"]},
         {"container_runtime_daemon_options": {"registry-mirrors": ["https://r.example.internal"]}}),
        ({"readiness": {"timeoutSeconds": 600}, "diskCheck": {"marginGb": 5}},
         {"sglang_serve_ready_timeout_s": 600, "preflight_disk_margin_gb": 5}),
    ],
)  # fmt: skip
def test_each_field_sets_every_role_argument_that_reads_it(
    site: dict[str, Any], args: dict[str, Any]
) -> None:
    assert Site.model_validate(site).role_args() == args
