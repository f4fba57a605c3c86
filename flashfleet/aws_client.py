"""boto3 clients with flashfleet's retry settings, made in one place: for `sweep` and the capacity
checks, and for the dynamic resources that call AWS themselves (host keys, the weights cache). A
leaf: it imports nothing of flashfleet, so any layer may use it.

Credentials, profile and endpoint are boto3's own (AWS_PROFILE, AWS_ENDPOINT_URL, ...). boto3 is
imported only when a client is made: the CLI's other commands stay light.
"""

from __future__ import annotations

from typing import Any


def aws_client(service: str, region: str | None = None) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        service, region_name=region, config=Config(retries={"mode": "standard", "max_attempts": 3})
    )


class NoAwsCredentials(Exception):
    """No credentials anywhere boto3 would look: said before a client is made."""


def ec2_client(region: str | None = None) -> Any:
    """boto3's EC2 client with the standard settings (profile, region, AWS_ENDPOINT_URL...);
    NoAwsCredentials first, before boto3 loads the EC2 model, when there are no credentials."""
    if not has_credentials():
        raise NoAwsCredentials(NO_CREDENTIALS)
    return aws_client("ec2", region)


NO_CREDENTIALS = (
    "no AWS credentials found (AWS_PROFILE, AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY, or an "
    "instance role)"
)


def has_credentials() -> bool:
    """Whether botocore's credential chain (environment, profile, container, instance role) finds
    any: the first refusal of every AWS command, in the same words, before a client loads its
    service's model (the larger part of boto3's start-up)."""
    from botocore.session import get_session

    return get_session().get_credentials() is not None
