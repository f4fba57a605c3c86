"""`flashfleet check [STACK]`: is this machine ready to drive a stack (like `sky check`)?

One line per check, ok or missing, and the fix when not ok. Offline by default: the Pulumi CLI
answers `version` and `whoami` locally, AWS credentials are resolved by boto3's chain without a
call (`--online`: `sts get-caller-identity`), existing hosts get a TCP connect to their SSH port.

Exit status: 0 every check passed, 1 one did not, 2 bad input (unknown stack file).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from flashfleet.cli.common import UsageError, add_format, add_stack, print_json

if TYPE_CHECKING:
    from flashfleet.planning import StackPlan

PULUMI_README = "README: Pulumi: install, log in, create a stack (once)"
AWS_README = "README: AWS: credentials, then up"
SSH_TIMEOUT_S = 3.0
# Backends whose secrets are encrypted with a passphrase (no Pulumi Cloud account).
SELF_MANAGED = ("file://", "s3://", "azblob://", "gs://")


class Check(BaseModel):
    check: str
    ok: bool
    detail: str
    fix: str | None = None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", help="is this machine ready: Pulumi, backend, credentials, hosts")
    add_stack(p, "stack name, or the path of its file (default: check the tools only)", required=False)
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    p.add_argument("--online", action="store_true", help="AWS stacks: ask STS who the credentials are")
    p.add_argument(
        "--ssh-port", type=int, default=22, metavar="PORT", help="existing hosts' SSH port (default: 22)"
    )
    add_format(p, "text", "json")
    p.set_defaults(func=run)


def _pulumi(exe: str, *argv: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run([exe, *argv], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _missing_folder(url: str) -> Path | None:
    """The folder of a file:// backend when it does not exist (Pulumi will not create it)."""
    if not url.startswith("file://"):
        return None
    folder = Path(url.removeprefix("file://").split("?")[0]).expanduser()
    return None if folder.is_dir() else folder


def pulumi_checks() -> list[Check]:
    exe = shutil.which("pulumi")
    if exe is None:
        return [Check(check="pulumi cli", ok=False, detail="not found on PATH", fix=PULUMI_README)]
    version = _pulumi(exe, "version")
    if version is None or version.returncode != 0:
        return [Check(check="pulumi cli", ok=False, detail=f"{exe} does not run", fix=PULUMI_README)]
    out = [Check(check="pulumi cli", ok=True, detail=f"{version.stdout.strip()} ({exe})")]
    env_url = os.environ.get("PULUMI_BACKEND_URL", "")
    missing = _missing_folder(env_url)
    who = None if missing else _pulumi(exe, "whoami", "--verbose")
    if missing:
        fix = f'mkdir -p "{missing}"'
        detail = f"{env_url} (PULUMI_BACKEND_URL): the folder is missing"
        return [*out, Check(check="pulumi backend", ok=False, detail=detail, fix=fix)]
    if who is None or who.returncode != 0:
        why = (who.stderr.strip().splitlines() or ["no answer"])[-1] if who else "no answer"
        fix = 'mkdir -p "$HOME/.pulumi-state" && pulumi login "file://$HOME/.pulumi-state"'
        return [*out, Check(check="pulumi backend", ok=False, detail=f"not logged in: {why}", fix=fix)]
    url = env_url or next(
        (ln.split(":", 1)[1].strip() for ln in who.stdout.splitlines() if ln.startswith("Backend URL:")), ""
    )
    missing = _missing_folder(url)
    if missing:
        fix = f'mkdir -p "{missing}"'
        out.append(Check(check="pulumi backend", ok=False, detail=f"{url}: the folder is missing", fix=fix))
    else:
        out.append(Check(check="pulumi backend", ok=True, detail=url or "logged in"))
    if url.startswith(SELF_MANAGED):
        has = any(os.environ.get(v) for v in ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"))
        fix = "read -rs PULUMI_CONFIG_PASSPHRASE && export PULUMI_CONFIG_PASSPHRASE"
        detail = "set" if has else "neither PULUMI_CONFIG_PASSPHRASE nor PULUMI_CONFIG_PASSPHRASE_FILE is set"
        out.append(Check(check="pulumi passphrase", ok=has, detail=detail, fix=None if has else fix))
    return out


def aws_checks(region: str | None, online: bool) -> list[Check]:
    import boto3  # only when AWS is checked
    import botocore.exceptions

    session = boto3.Session()
    creds = session.get_credentials()  # the credential chain, resolved locally
    if creds is None:
        fix = "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; " + AWS_README
        return [Check(check="aws credentials", ok=False, detail="none found", fix=fix)]
    out = [Check(check="aws credentials", ok=True, detail=f"from {creds.method}")]
    name = region or session.region_name
    if name:
        source = "the stack" if region else "the environment or profile"
        out.append(Check(check="aws region", ok=True, detail=f"{name} (from {source})"))
    else:
        fix = "export AWS_DEFAULT_REGION=us-east-2 (or set region in your AWS profile)"
        out.append(Check(check="aws region", ok=False, detail="none set", fix=fix))
    if online and name:
        try:
            arn = session.client("sts", region_name=name).get_caller_identity()["Arn"]
            out.append(Check(check="aws identity", ok=True, detail=arn))
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
            out.append(Check(check="aws identity", ok=False, detail=str(err), fix=AWS_README))
    return out


def ssh_checks(plan: StackPlan, port: int) -> list[Check]:
    from flashfleet.stack import ExistingSource
    from flashfleet.stack.placeholder_addresses import placeholder_network, placeholder_text

    src = plan.spec.nodes.source
    assert isinstance(src, ExistingSource)
    out = []
    for i, host in enumerate(src.hosts):
        if net := placeholder_network(host.address):  # never routed: a connection only times out
            out.append(
                Check(
                    check=f"ssh {host.address}", ok=False, detail=placeholder_text(host.address, net),
                    fix=f"put the host's own address in nodes.source.hosts[{i}].address",
                )
            )  # fmt: skip
            continue
        try:
            with socket.create_connection((host.address, port), timeout=SSH_TIMEOUT_S):
                out.append(Check(check=f"ssh {host.address}", ok=True, detail=f"port {port} answers"))
        except OSError as err:
            detail = f"port {port}: {err.strerror or type(err).__name__}"
            reach = f"check that sshd listens on {host.address}:{port} and that no firewall drops it"
            out.append(Check(check=f"ssh {host.address}", ok=False, detail=detail, fix=reach))
        pinned = bool(host.host_keys)
        detail = f"{len(host.host_keys)} pinned" if pinned else "none pinned (hostKeys)"
        pin = None if pinned else f"add `ssh-keyscan {host.address}` lines (verified) to the host's hostKeys"
        out.append(
            Check(
                check=f"host key {host.address}",
                ok=pinned or src.allow_unpinned_host_keys,
                detail=detail,
                fix=pin,
            )
        )
    return out


def kubeconfig_check() -> Check:
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or [
        str(Path.home() / ".kube" / "config")
    ]
    found = [p for p in paths if Path(p).is_file()]
    if found:
        return Check(check="kubeconfig", ok=True, detail=", ".join(found))
    fix = "set KUBECONFIG to your cluster's kubeconfig; README: Kubernetes"
    return Check(check="kubeconfig", ok=False, detail=f"not found ({', '.join(paths)})", fix=fix)


def run(args: argparse.Namespace) -> int:
    checks: list[Check] = []
    plan = None
    if not 0 < args.ssh_port < 65536:
        raise UsageError(f"--ssh-port {args.ssh_port}: a TCP port is 1-65535")
    if args.stack is not None:
        from flashfleet.cli.common import stack_arg
        from flashfleet.planning import load_stack
        from flashfleet.stack import StackError

        name, folder = stack_arg(args.stack, args.stacks_dir)
        try:
            plan = load_stack(name, folder)
        except StackError as err:
            raise UsageError(str(err)) from None
    checks += pulumi_checks()
    kind = plan.spec.nodes.source.kind if plan is not None else None
    if kind in (None, "aws"):
        checks += aws_checks(plan.region if plan is not None else None, args.online and kind == "aws")
    if plan is not None and kind == "existing":
        checks += ssh_checks(plan, args.ssh_port)
    if kind == "kubernetes":
        checks.append(kubeconfig_check())
    # Without a stack, AWS is informative: a machine for existing hosts needs no AWS account.
    required = [c for c in checks if plan is not None or not c.check.startswith("aws")]
    if args.format == "json":
        print_json([c.model_dump() for c in checks])
    else:
        for c in checks:
            line = f"{c.check:<28} {'ok' if c.ok else 'missing':<8} {c.detail}"
            print(line + (f"\n{'':<37}fix: {c.fix}" if c.fix and not c.ok else ""))
    return 0 if all(c.ok for c in required) else 1
