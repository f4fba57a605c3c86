"""Fixtures shared across test folders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """A moto server on loopback: the EC2/SSM API that boto3 (and a provider process) talks to."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def moto_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """boto3 here, and any process started from here, talks to moto with test credentials and
    none of the caller's own AWS profile or region."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return moto_url
