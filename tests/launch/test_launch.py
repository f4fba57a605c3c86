"""Container launches (issue 9): golden docker commands, GPU access per vendor, pins, secrets."""

import shlex
from pathlib import Path

import pytest
from pydantic import ValidationError

from flashfleet.cli import main
from flashfleet.launch import ContainerLaunch, LaunchSettings, check_build_requirements, container_launches
from flashfleet.recipes import RecipeError, render
from flashfleet.stack.image import ImageSpec

GOLDEN = Path(__file__).parent / "golden"
AGENTX = {"precision": "mxfp4", "hicache": "l1l2", "hicache_size": 180}
CASES = {
    "gb300-lowlat": ["--hardware", "gb300", "--strategy", "low-latency"],
    "h200-throughput": ["--hardware", "h200", "--strategy", "high-throughput"],
    "gb300-pd": ["--hardware", "gb300", "--strategy", "high-throughput", "--topology", "pd"],
    "mi355x-agentx": [
        "--hardware",
        "mi355x",
        "--strategy",
        "low-latency",
        "--set",
        "precision=mxfp4",
        "--set",
        "hicache=l1l2",
        "--set",
        "hicache_size=180",
        "--image-includes",
        "#42178",
    ],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_docker_golden(capsys, name):
    assert main(["render", *CASES[name], "--format", "docker", "--derived-image"]) == 0
    assert capsys.readouterr().out == GOLDEN.joinpath(f"{name}.docker.sh").read_text()


def docker_commands(text: str) -> list[list[str]]:
    """The docker run commands of a rendered script, as argv lists (what a shell would run)."""
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return [
        shlex.split(block) for block in "\n".join(lines).replace("\\\n", " ").split("\n") if block.strip()
    ]


def test_pd_processes_each_on_their_own_gpus():
    text = GOLDEN.joinpath("gb300-pd.docker.sh").read_text()
    prefill, decode, router = docker_commands(text)
    assert prefill[prefill.index("--gpus") + 1] == '"device=0,1"'
    assert decode[decode.index("--gpus") + 1] == '"device=2,3"'
    assert "--gpus" not in router
    # Inside its container the decode role sees its two GPUs as 0 and 1: no --base-gpu-id offset.
    assert "--base-gpu-id" not in decode
    recipe = render("gb300", "high-throughput", "pd")
    bare = next(p for p in recipe.processes if p.name == "decode").argv
    launch = next(launch for launch in container_launches(recipe) if launch.name == "decode")
    i = bare.index("--base-gpu-id")
    assert bare[i + 1] == "2"
    assert [*bare[:i], *bare[i + 2 :]] == list(launch.argv)


def test_docker_command_carries_the_render_argv_and_env():
    recipe = render("gb300", "high-throughput", "pd")
    for launch, proc in zip(container_launches(recipe), recipe.start_order(), strict=True):
        argv = list(launch.docker_run)
        assert argv[-len(launch.argv) :] == list(launch.argv)
        assert argv[-len(launch.argv) - 1] == launch.image
        for key, value in proc.env.items():
            assert f"{key}={value}" in argv
        for flag, value in (("--network", "host"), ("--ipc", "host")):
            assert argv[argv.index(flag) + 1] == value


def test_amd_device_access():
    (launch,) = container_launches(render("mi355x", "low-latency", overrides=AGENTX))
    argv = list(launch.docker_run)
    for device in ("/dev/kfd", "/dev/dri"):
        assert argv[argv.index(device) - 1] == "--device"
    assert argv[argv.index("--group-add") + 1] == "video"
    assert argv[argv.index("--security-opt") + 1] == "seccomp=unconfined"
    assert "--gpus" not in argv
    assert launch.env["HIP_VISIBLE_DEVICES"] == "0,1,2,3"


def test_l3_mounts_mooncake_config_and_rdma():
    (launch,) = container_launches(render("h200", "low-latency", overrides={"hicache": "l1l2l3"}))
    config = launch.env["SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"]
    mount = next(m for m in launch.mounts if config.startswith(m.target + "/"))
    assert mount.read_only
    assert "/dev/infiniband" in launch.devices
    assert "IPC_LOCK" in launch.cap_add


@pytest.mark.parametrize(
    ("hardware", "ref"),
    [
        ("gb300", "lmsysorg/sglang:v0.5.23-cu130"),
        ("h200", "lmsysorg/sglang:v0.5.23"),
        ("mi355x", "lmsysorg/sglang:v0.5.23-rocm720-mi35x"),
    ],
)
def test_image_per_node_build(hardware, ref):
    from flashfleet.catalog import hardware_catalog

    hw = hardware_catalog()[hardware]
    assert ImageSpec(derived=False).ref(hw) == ref
    assert ImageSpec().ref(hw).startswith("flashfleet/sglang:")
    digest = "sha256:" + "a" * 64
    assert ImageSpec(derived=False, digest=digest).ref(hw) == f"{ref}@{digest}"


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"version": "v0.5.19"}, "predates"),
        ({"version": "latest"}, "not a release version"),
        ({"tag": "latest"}, "floats"),
        ({"tag": "v0.5.23-cu130-nightly"}, "floats"),
        ({"tag": "v0.5.22-cu130"}, "must start with the version"),
        ({"includes": ["42178"]}, "write pull requests"),
        ({"digest": "sha256:zz"}, "pattern"),
        ({"registry": "x"}, "Extra inputs are not permitted"),
    ],
)
def test_image_spec_refuses_floating_or_old(fields, needle):
    with pytest.raises(ValidationError) as info:
        ImageSpec.model_validate(fields)
    assert needle in str(info.value)


def test_build_requirements():
    agentx = render("mi355x", "low-latency", overrides=AGENTX)
    with pytest.raises(RecipeError) as info:
        check_build_requirements(agentx, ImageSpec())
    assert info.value.rule == "mi355x-host-tier"
    assert "#42178" in info.value.message
    check_build_requirements(agentx, ImageSpec(includes=("#42178",)))
    assert any("#42178" in n for n in agentx.notes)

    breakable = render("gb300", "low-latency", overrides={"breakable_cuda_graph": "on"})
    check_build_requirements(breakable, ImageSpec(version="v0.5.23"))
    with pytest.raises(RecipeError) as info:
        check_build_requirements(breakable, ImageSpec(version="v0.5.21"))
    assert info.value.rule == "breakable-cuda-graph"
    check_build_requirements(breakable, ImageSpec(version="v0.5.21", includes=("#38522",)))
    # Nothing special needed by the plain recipe on any supported release.
    check_build_requirements(render("gb300", "low-latency"), ImageSpec(version="v0.5.20"))


def test_no_token_value_anywhere(capsys, monkeypatch):
    token = "hf_TESTTOKENshouldNeverAppear123"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("FLASHFLEET_HF_TOKEN", token)
    for name, argv in CASES.items():
        assert main(["render", *argv, "--format", "docker"]) == 0, name
        out = capsys.readouterr().out
        assert token not in out
        assert "HF_TOKEN=" not in out.replace("holds HF_TOKEN=...", "")
        assert "--env-file /etc/flashfleet/secrets.env" in out
    recipe = render("gb300", "high-throughput", "pd")
    for launch in container_launches(recipe, LaunchSettings()):
        assert token not in repr(launch.model_dump(mode="json"))
        assert "HF_TOKEN" not in launch.env


def test_docker_run_is_its_option_groups_then_image_then_command():
    """The `docker run` argv and the CLI's one-option-per-line print come from the same groups:
    an option's value is never guessed from how it looks (a value starting with '-' stays put)."""
    recipe = render("mi355x", "low-latency", overrides={**AGENTX, "hicache": "l1l2l3"})
    (launch,) = container_launches(recipe)
    groups = launch.docker_options()
    assert all(len(g) in (1, 2) and g[0].startswith("-") for g in groups)
    flat = [word for group in groups for word in group]
    assert list(launch.docker_run) == ["docker", "run", *flat, launch.image, *launch.argv]
    odd = launch.model_copy(update={"env": {"X": "1"}, "ulimits": {"nofile": "-1"}})
    assert ("--ulimit", "nofile=-1") in odd.docker_options()
    assert ("-e", "X=1") in odd.docker_options()


def test_a_launch_round_trips_through_its_dump_and_refuses_a_disagreeing_copy():
    """The inventory carries the launch as dumped (JSON lists), and reads it back as the same
    model; derived facts (docker_run, gpu_request...) that disagree with the rest are refused."""
    for launch in container_launches(render("gb300", "high-throughput", "pd")):
        dumped = launch.model_dump(mode="json")
        assert ContainerLaunch.model_validate(dumped) == launch
        for name, value in (
            ("docker_run", ["docker", "run", launch.image, *launch.argv]),
            ("gpu_request", None if launch.gpus else '"device=0"'),
            ("serves_http", not launch.serves_http),
        ):
            with pytest.raises(ValidationError, match=f"{name} is not what the launch's other fields give"):
                ContainerLaunch.model_validate({**dumped, name: value})
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            ContainerLaunch.model_validate({**dumped, "ports": [1]})


def test_the_jit_cache_puts_every_compile_cache_on_the_cache_volume_one_folder_per_image():
    from flashfleet.launch import CONTAINER_HF_CACHE, JIT_CACHE_DIR, kernel_cache_key

    pd = render("gb300", "high-throughput", "pd")
    image = ImageSpec()
    off = container_launches(pd, LaunchSettings(image=image))
    on = container_launches(pd, LaunchSettings(image=image, jit_cache=True))
    cuda = {"FLASHINFER_WORKSPACE_BASE", "DG_JIT_CACHE_DIR", "TRITON_CACHE_DIR", "TVM_FFI_CACHE_DIR"}
    for before, after in zip(off, on, strict=True):
        added = {k: v for k, v in after.env.items() if k not in before.env}
        assert {k: after.env[k] for k in before.env} == before.env  # the recipe's own env wins
        if before.role == "router":
            assert added == {}  # it compiles nothing
            continue
        assert cuda | {"CUDA_CACHE_PATH", "TORCHINDUCTOR_CACHE_DIR"} <= set(added)
        folders = {v.rsplit("/", 1)[0] for v in added.values()}
        assert len(folders) == 1  # every cache of a process under one folder...
        (folder,) = folders
        assert folder.startswith(f"{CONTAINER_HF_CACHE}/{JIT_CACHE_DIR}/")  # ...on the cache volume's mount
        assert any(m.target == CONTAINER_HF_CACHE and not m.read_only for m in after.mounts)
        assert len(set(added.values())) == len(added)  # each library its own folder
    # the same folder on every node of the image; another image, another folder
    assert len({launch.env.get("TRITON_CACHE_DIR") for launch in on if launch.role != "router"}) == 1
    other = container_launches(pd, LaunchSettings(image=ImageSpec(version="v0.5.22"), jit_cache=True))
    assert other[0].env["TRITON_CACHE_DIR"] != on[0].env["TRITON_CACHE_DIR"]
    # a locked image (its digest) and another GPU model: other folders too
    locked = ImageSpec(digest="sha256:" + "0" * 64)
    pinned = container_launches(pd, LaunchSettings(image=locked, jit_cache=True))
    assert pinned[0].env["TRITON_CACHE_DIR"] != on[0].env["TRITON_CACHE_DIR"]
    h200 = container_launches(
        render("h200", "high-throughput", "pd"), LaunchSettings(image=image, jit_cache=True)
    )
    assert h200[0].env["TRITON_CACHE_DIR"] != on[0].env["TRITON_CACHE_DIR"]
    assert kernel_cache_key("one/image:v1", "h200") != kernel_cache_key("one/image:v1", "gb300")
    # ROCm has no CUDA PTX cache
    amd = container_launches(render("mi355x", "low-latency", "unified"), LaunchSettings(jit_cache=True))
    assert "CUDA_CACHE_PATH" not in amd[0].env
    assert cuda <= set(amd[0].env)


def test_kernel_args_keep_the_words_that_change_kernels_and_drop_the_rest():
    """Every node and rank of a cluster that builds the same kernels has the same kernel words
    (so a cache one node built leaves the others, and the next bring-up, nothing to build)."""
    from flashfleet.launch import kernel_args

    two = render("h200", "high-throughput", "unified", {"replicas": 2, "peer_load": "on"},
                 addresses=["10.0.0.1", "10.0.0.2"])  # fmt: skip
    servers = [p for p in two.processes if p.role != "router"]
    assert len(servers) == 2
    assert servers[0].argv != servers[1].argv
    assert len({kernel_args(p.argv) for p in servers}) == 1
    multi = render("h200", "high-throughput", "unified", {"nodes": 2}, addresses=["10.0.0.1", "10.0.0.2"])
    assert len({p.argv for p in multi.processes}) == 2
    assert len({kernel_args(p.argv) for p in multi.processes}) == 1  # every rank
    base = kernel_args(render("h200", "high-throughput", "unified").processes[0].argv)
    assert "--port" not in base
    assert "--reasoning-parser" not in base
    assert base[base.index("--tp-size") + 1] == "8"
    # neutral: the parsers, the weights' source; not neutral: the batch size CUDA graphs capture
    same = render("h200", "high-throughput", "unified", {"reasoning_parser": "off", "weight_cache": "client"})
    assert kernel_args(same.processes[0].argv) == base
    more = render("h200", "high-throughput", "unified", {"max_running_requests": 32})
    assert kernel_args(more.processes[0].argv) != base


def test_a_stack_plan_carries_the_jit_cache_into_docker_and_kubernetes(capsys):
    import json

    assert main(["manifest", "mi355x-k8s", "--format", "json"]) == 0
    manifests = json.loads(capsys.readouterr().out)

    def envs(node):
        if isinstance(node, dict):
            if "containers" in node and "volumes" in node:
                yield node
            for v in node.values():
                yield from envs(v)
        elif isinstance(node, list):
            for v in node:
                yield from envs(v)

    servers = [p for p in envs(manifests) if any(c["name"] == "server" for c in p["containers"])]
    assert servers, "no server pod spec"
    for pod in servers:
        (server,) = [c for c in pod["containers"] if c["name"] == "server"]
        env = {e["name"]: e.get("value") for e in server.get("env", [])}
        mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
        # the folder is on the pod's cache volume (the hostPath or the PVC), not in the container
        assert env["TRITON_CACHE_DIR"].startswith("/root/.cache/huggingface/.flashfleet-jit/")
        assert "/root/.cache/huggingface" in mounts
        assert "CUDA_CACHE_PATH" not in env  # MI355X
    assert main(["plan", "gb300-lowlat"]) == 0
    assert "-e TRITON_CACHE_DIR=/root/.cache/huggingface/.flashfleet-jit/" in capsys.readouterr().out
