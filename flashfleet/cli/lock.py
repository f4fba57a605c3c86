"""`flashfleet lock STACK [--update]`: pin what the stack fetches, in <stack>.lock.yaml.

Resolves each repository the stack's recipe loads (the checkpoint, and the DFlash2 draft when
selected) at the catalog's revision to the commit it names today, with every file's size and hash
as the Hub lists them (`HfApi.model_info(files_metadata=True)`), and writes the lock beside the
stack file (flashfleet.stack.lock). The Hub is the one the nodes download from: the stack's
`site.hub.endpoint` (a mirror), else $HF_ENDPOINT, else huggingface.co; a
gated repository needs $HF_TOKEN, which is sent only over https (or over http where the stack's
`site.hub.tokenOverHttp` is true). The image the nodes pull (`repository:tag`)
is resolved in its registry to the digest it names today and each platform's
(flashfleet/image_registry.py); the nodes' architecture must be among them. Each Python
distribution the nodes pip-install (flashfleet/planning/packages.py) is resolved on the index they
install it from (the stack's site section: a mirror or a wheel folder, else PyPI) to the newest version
its specifier allows, with every file of that version and its sha256 (flashfleet/package_index.py).
What the roles apt-install from vendors' repositories (the NVIDIA driver, Docker Engine, the NVIDIA
container toolkit, the AMD driver and ROCm) is resolved in each repository directory the nodes'
sources may name (the stack's site section's mirrors, else the vendors';
flashfleet/planning/apt_packages.py): every package apt takes from it for the role, with its
version, size and SHA256 (flashfleet/apt_index.py). What the derived image apt-installs from its
base's distribution (FFmpeg) is resolved in a snapshot of that archive
(flashfleet/planning/image_apt.py): the distribution read from the base's labels, the moment the
lock already names (now for a new lock or `--update`), each suite's signed index hash. An AWS
stack's AMIs (the Deep Learning AMI, a router's Ubuntu) are resolved through their public SSM
parameters in the stack's region to the id each names today (flashfleet/planning/node_images.py).

With a lock already there: the same pins print "current"; pins that moved upstream print as a
diff and exit 1, and `--update` prints the diff and writes it.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from flashfleet.cli.common import UsageError, add_stack
from flashfleet.user_files import write_text_atomically

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from flashfleet.catalog import Hardware
    from flashfleet.planning.apt_packages import AptWant
    from flashfleet.planning.node_images import NodeImage
    from flashfleet.stack.lock import LockedAmi, LockedDeb, LockedImageApt, LockedRepo, StackLock
    from flashfleet.stack.spec import StackSpec


class HubError(RuntimeError):
    """The Hub did not resolve a repository; the message is one line."""


class AmiError(RuntimeError):
    """SSM did not resolve an AMI parameter; the message is one line."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # `lock --help` shows the description: every part of the lock, so a reader knows what it pins
    what = (
        "Pin what the stack fetches in <stack>.lock.yaml, beside the stack file: the weights (each "
        "repository's commit, every file's size and hash), the image (digest, per platform), the pip "
        "packages the nodes install (version, every file's sha256), the vendors' apt packages "
        "(version, size, SHA256: NVIDIA driver, Docker Engine, container toolkit, AMD driver and "
        "ROCm), the derived image's FFmpeg (a snapshot of its distribution's archive, each suite's "
        "index hash) and an AWS stack's AMIs (ids, per region). With a lock there, pins that moved "
        "upstream print as a diff and exit 1; --update writes them."
    )
    p = sub.add_parser("lock", help=what, description=what)
    add_stack(p, "stack name, or the path of its file (stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    p.add_argument(
        "--update", action="store_true",
        help="resolve again and write what moved upstream (the diff is printed first)",
    )  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flashfleet.apt_index import AptIndexError
    from flashfleet.catalog import download_client, hardware_catalog
    from flashfleet.cli.common import stack_arg
    from flashfleet.image_registry import ARCH, RegistryError, resolve_image
    from flashfleet.package_index import PackageIndexError, resolve_package
    from flashfleet.planning import parse_spec, resolve_spec
    from flashfleet.planning.apt_packages import node_apt
    from flashfleet.planning.node_images import node_images
    from flashfleet.planning.packages import pip_installs
    from flashfleet.stack import StackError, read_stack_file
    from flashfleet.stack.lock import StackLock, dump_lock, lock_diff, lock_path

    name, folder = stack_arg(args.stack, args.stacks_dir)
    try:
        sf = read_stack_file(name, folder)
        # the recipe decides what is downloaded; a `lock: required` stack is locked from here,
        # so the lock it does not have yet is not asked for
        spec = parse_spec(name, sf.spec_data).model_copy(update={"lock": "optional"})
        plan = resolve_spec(name, spec, region=sf.region, has_hf_token=sf.has_hf_token)
    except StackError as err:
        raise UsageError(str(err)) from None
    endpoint = spec.site.hub.endpoint or os.environ.get("HF_ENDPOINT") or None
    over_http = spec.site.hub.token_over_http
    if os.environ.get("HF_TOKEN") and not token_may_go(endpoint, over_http):
        print(
            f"flashfleet lock: warning: {endpoint} is not https: HF_TOKEN is not sent to it (a gated "
            "repository is refused; site.hub.tokenOverHttp: true sends it)",
            file=sys.stderr,
        )
    revision = download_client().revision
    hw = hardware_catalog()[spec.hardware]
    image = spec.image.tagged_ref(hw)
    try:
        repos = plan.recipe.repositories
        weights = {repo: resolve_repo(repo, revision, endpoint, over_http=over_http) for repo in repos}
        locked_image, labels = resolve_image(image, ARCH[hw.arch], spec.image.digest)
        images = {image: locked_image}
        image_apt = (
            resolve_image_apt(spec, hw, plan.site_args, labels, old=sf.lock, update=args.update)
            if spec.image.derived
            else {}
        )
        packages = {
            name: resolve_package(
                name,
                want.specifier,
                index_url=want.index_url,
                find_links=want.find_links,
                platform=want.platform,
            )
            for name, want in pip_installs(spec, plan.site_args).items()
        }
        apt = resolve_apt(node_apt(spec, plan.site_args, plan.router_arch))
        amis = resolve_amis(node_images(spec, hw.arch, sf.region, plan.router_arch, None), sf.region)
    except (HubError, RegistryError, PackageIndexError, AptIndexError, AmiError) as err:
        print(f"flashfleet lock: {err}", file=sys.stderr)
        return 1
    new = StackLock(
        stack=name, locked_on=datetime.now(UTC).date().isoformat(), weights=weights, images=images,
        packages=packages, apt=apt, image_apt=image_apt, amis=amis,
    )  # fmt: skip
    path = lock_path(sf.path, name)
    old = sf.lock
    if old is not None and new.pins_same(old):
        pins = [f"{r} @ {e.commit}" for r, e in old.weights.items()]
        pins += [f"{ref} @ {e.digest}" for ref, e in old.images.items()]
        pins += [f"{n}=={e.version}" for n, e in sorted(old.packages.items())]
        pins += [f"{len(debs)} apt packages from {index}" for index, debs in old.apt.items()]
        pins += [f"{ref}'s {', '.join(e.packages)} from {e.snapshot}" for ref, e in old.image_apt.items()]
        pins += [f"{e.ami} ({parameter} in {e.region})" for parameter, e in old.amis.items()]
        print(f"{path.name} is current: " + ", ".join(pins))
        return 0
    if old is not None:
        print(lock_diff(old, new, path.name), end="")
        if not args.update:
            print(
                f"flashfleet lock: {path.name} no longer matches the Hub, the registry, the package "
                f"indexes or SSM (above); `flashfleet lock {name} --update` writes it",
                file=sys.stderr,
            )
            return 1
    write_text_atomically(path, dump_lock(new))  # the old lock stays whole if this fails
    for repo, entry in new.weights.items():
        print(f"locked {repo} @ {entry.commit} ({entry.revision}, {len(entry.files)} files)")
    for ref, locked in new.images.items():
        print(f"locked {ref} @ {locked.digest} ({', '.join(sorted(locked.platforms))})")
    for pkg, package in sorted(new.packages.items()):
        print(f"locked {pkg}=={package.version} ({len(package.files)} files)")
    for index, debs in new.apt.items():
        versions = ", ".join(f"{n}={d.version}" for n, d in debs.items())
        print(f"locked {len(debs)} apt packages from {index} ({versions})")
    for ref, held in new.image_apt.items():
        versions = ", ".join(f"{n}={d.version}" for n, d in held.packages.items())
        print(f"locked the derived image's {versions} on {ref} ({held.distribution}) from {held.snapshot}")
    for parameter, ami in new.amis.items():
        print(f"locked {ami.ami}: what {parameter} names in {ami.region}")
    print(f"wrote {path}")
    return 0


def resolve_image_apt(
    spec: StackSpec,
    hw: Hardware,
    site_args: Mapping[str, Any],
    labels: Mapping[str, str],
    *,
    old: StackLock | None,
    update: bool,
) -> dict[str, LockedImageApt]:
    """What the derived image apt-installs from the base's distribution archive, in a snapshot of
    it: the moment the lock already names (a snapshot never changes, so an unchanged archive
    resolves the same), or for a new lock and `--update` the archive as it is now, at the moment
    it published that (its suites' newest InRelease Date: past, so settled, where the clock's
    moment may be newer than the service has settled). A base whose labels name no distribution
    the catalog knows is left floating, said on stderr."""
    from flashfleet.apt_index import published_moment, resolve_snapshot
    from flashfleet.planning.image_apt import LABEL_NAME, LABEL_VERSION, distribution, image_apt_want
    from flashfleet.stack.lock import LockedImageApt

    ref = spec.image.tagged_ref(hw)
    dist = distribution(labels)
    if dist is None:
        named = f"{labels.get(LABEL_NAME, '?')} {labels.get(LABEL_VERSION, '?')}"
        print(
            f"flashfleet lock: {ref} does not name a distribution whose archive flashfleet knows (its "
            f"labels {LABEL_NAME} and {LABEL_VERSION}: {named}); the derived image's apt packages "
            "stay floating",
            file=sys.stderr,
        )
        return {}
    want = image_apt_want(hw, site_args, dist)
    held = old.image_apt.get(ref) if old is not None else None
    moment = held.snapshot.rstrip("/").rpartition("/")[2] if held is not None and not update else None
    if moment is None:  # the archive as it is now, named by the moment it was published
        now = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        moment = published_moment(want.snapshot(now), want.suites) or now
    snapshot = want.snapshot(moment)
    suites, packages = resolve_snapshot(snapshot, want.suites, want.components, want.arch, want.install)
    return {
        ref: LockedImageApt(
            distribution=dist,
            arch=want.arch,
            snapshot=snapshot,
            components=list(want.components),
            suites=suites,
            packages=packages,
        )
    }


def resolve_amis(images: list[NodeImage], region: str | None) -> dict[str, LockedAmi]:
    """The AMI id each public SSM parameter the instances boot from names today in the stack's
    region (not one the stack names itself). Without AWS credentials they stay floating, said on
    stderr: the parameters are read at bring-up, with the credentials `pulumi up` has."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from flashfleet.stack.lock import LockedAmi

    wanted = [image for image in images if image.stack_ami is None]
    if not wanted:
        return {}
    out = {}
    asked = wanted[0].parameter  # what an error names
    try:
        client = boto3.session.Session(region_name=region).client("ssm")  # credentials as they are now
        for image in wanted:
            asked = image.parameter
            value = client.get_parameter(Name=asked)["Parameter"]["Value"]
            out[asked] = LockedAmi(region=str(client.meta.region_name), ami=value)
    except NoCredentialsError:
        print(
            "flashfleet lock: no AWS credentials to read the AMIs' SSM parameters: "
            f"{', '.join(i.label for i in wanted)} stay floating (each parameter as it is at bring-up)",
            file=sys.stderr,
        )
        return {}
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "an error")
        raise AmiError(f"{asked} in {region}: SSM answered {code}") from None
    except (BotoCoreError, ValueError) as err:
        raise AmiError(f"{asked} in {region}: {type(err).__name__}: {err}") from None
    return out


def resolve_apt(wants: list[AptWant]) -> dict[str, dict[str, LockedDeb]]:
    """Each want whose directories the repositories serve, resolved; a distribution they do not
    serve is left out (a node on it fails closed), a role they serve none of is an error."""
    from flashfleet.apt_index import AptIndexError, NoIndex, resolve

    out: dict[str, dict[str, LockedDeb]] = {}
    missing: dict[str, list[str]] = {}
    for want in wants:
        try:
            found = resolve([i.url for i in want.indexes], want.install, want.globs())
        except NoIndex as err:
            missing.setdefault(want.label, []).append(str(err))
            continue
        for index in want.indexes:  # each one it reads, even one it takes nothing from
            out.setdefault(index.url, {}).update(found.get(index.url, {}))
    for label, errors in missing.items():
        if not any(w.label == label and all(i.url in out for i in w.indexes) for w in wants):
            raise AptIndexError(
                f"{label}: "
                + (errors[0] if len(errors) == 1 else f"none of {len(errors)} directories: {errors[0]}")
            )
    return out


def token_may_go(endpoint: str | None, over_http: bool) -> bool:
    """Whether the HF token may be sent to `endpoint` (None: huggingface.co): only over https, or
    over http where the stack says so (`model_weights_hf_token_over_http`), as on the nodes
    (roles/model_weights/files/weights_fetch.py)."""
    scheme = urlsplit(endpoint).scheme.lower() if endpoint else "https"
    return scheme == "https" or (scheme == "http" and over_http)


def resolve_repo(repo: str, revision: str, endpoint: str | None, *, over_http: bool = False) -> LockedRepo:
    """The repository's commit at `revision` and its files, from the Hub's repo info."""
    import httpx2  # huggingface_hub's HTTP client: its transport errors are the network's
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    from flashfleet.stack.lock import LockedFile, LockedRepo

    token = os.environ.get("HF_TOKEN") or None
    # False, not None: huggingface_hub would otherwise find a token of its own (a saved login)
    sent: str | bool = token if token and token_may_go(endpoint, over_http) else False
    try:
        info = HfApi(endpoint=endpoint, token=sent).model_info(repo, revision=revision, files_metadata=True)
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "no answer"
        hint = " (gated: set HF_TOKEN to a token with access)" if status in (401, 403) else ""
        raise HubError(f"{repo}@{revision}: the Hub answered {status}{hint}") from None
    except (OSError, httpx2.TransportError) as err:  # the network: refused, unreachable, timed out
        raise HubError(f"{repo}@{revision}: {type(err).__name__}: {_redacted(str(err), token)}") from None
    files: dict[str, LockedFile] = {}
    for s in info.siblings or []:
        if s.size is None:
            raise HubError(f"{repo}@{revision}: the Hub listed {s.rfilename} without its size")
        if s.lfs is not None:
            files[s.rfilename] = LockedFile(size=s.size, sha256=s.lfs.sha256)
        elif s.blob_id is not None:
            files[s.rfilename] = LockedFile(size=s.size, git_oid=s.blob_id)
        else:
            raise HubError(f"{repo}@{revision}: the Hub listed {s.rfilename} without a hash")
    if not info.sha or not files:
        raise HubError(f"{repo}@{revision}: the Hub gave no commit or no files")
    return LockedRepo(revision=revision, commit=info.sha, files=files)


def _redacted(text: str, token: str | None) -> str:
    return text.replace(token, "hf_***") if token else text
