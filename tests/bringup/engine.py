"""The provider side of `pulumi up`, without the Pulumi CLI: Pulumi's own dynamic provider host.

`python -m pulumi.dynamic` is the process the engine starts for dynamic resources. It receives
the provider as the engine sends it (dill-pickled, base64, under `__provider`), unpickles it
with `get_provider`, and serves Create/Diff/Update/Delete over gRPC. Driving it here gives the
same round trip as the real engine: a provider that captured a lock, a client or a logger fails
here exactly as it would there. Inputs go over as the engine sends them to a provider that does
not accept secrets: plain values.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
from pulumi.dynamic import ResourceProvider
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto, rpc
from pulumi.runtime.proto import provider_pb2_grpc

from flashfleet.bringup.provider import PlaybookRunProvider

URN = "urn:pulumi:test::flashfleet::pulumi-python:dynamic/flashfleet:PlaybookRun::bringup"


def serialized_provider(provider: ResourceProvider | None = None) -> str:
    return serialize_provider(provider or PlaybookRunProvider())


def _struct(props: dict[str, Any]) -> Any:
    return asyncio.run(rpc.serialize_properties(props, {}))


class ProviderHost:
    def __init__(self, workdir: Path, provider: ResourceProvider | None = None, urn: str = URN) -> None:
        self.stderr_path = workdir / "provider.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pulumi.dynamic"], stdout=subprocess.PIPE, stderr=self._stderr, cwd=workdir
        )
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)
        self.provider = serialized_provider(provider)
        self.urn = urn

    def _props(self, props: dict[str, Any]) -> Any:
        return _struct({**props, "__provider": self.provider})

    @property
    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def create(self, props: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        resp = self.stub.Create(proto.CreateRequest(urn=self.urn, properties=self._props(props)))
        return resp.id, rpc.deserialize_properties(resp.properties)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        resp = self.stub.Diff(
            proto.DiffRequest(id=id_, urn=self.urn, olds=self._props(olds), news=self._props(news))
        )
        return bool(resp.changes == proto.DiffResponse.DIFF_SOME)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> dict[str, Any]:
        req = proto.UpdateRequest(id=id_, urn=self.urn, olds=self._props(olds), news=self._props(news))
        return dict(rpc.deserialize_properties(self.stub.Update(req).properties))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        self.stub.Delete(proto.DeleteRequest(id=id_, urn=self.urn, properties=self._props(props)))

    def close(self) -> None:
        self.channel.close()
        self.process.terminate()
        self.process.wait(timeout=10)
        self._stderr.close()
