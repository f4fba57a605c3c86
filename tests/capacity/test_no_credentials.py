"""Without AWS credentials, `capacity` and `sweep` refuse in the same words, before any client
loads its service's model (boto3 stays unloaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CODE = """
import sys
from flashfleet.cli import main
rc = main(sys.argv[1:])
print("boto3 loaded" if "boto3" in sys.modules else "boto3 not loaded")
sys.exit(rc)
"""


def _without_credentials(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # no profile files, and no instance role to ask (this machine is no EC2 instance)
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")  # fmt: skip
    return env


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["capacity", "offers", "gb300-lowlat"], "nothing was asked of EC2"),
        (["sweep", "--region", "us-east-2"], "nothing was listed"),
    ],
)
def test_no_credentials_is_refused_in_one_line_before_boto3_loads(
    argv: list[str], line: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CODE, *argv], capture_output=True, text=True, env=_without_credentials(tmp_path),
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [err] = done.stderr.strip().splitlines()
    assert (
        "no AWS credentials found (AWS_PROFILE, AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY, or an instance role)"
        in err
    )
    assert err.endswith(line)
    assert done.stdout.strip().splitlines()[-1] == "boto3 not loaded"
