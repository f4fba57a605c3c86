"""Pulumi's Python language host for the engine that scripts/setup.d/40-pulumi.sh builds.

Upstream's host (Go module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3)
is not served by the Go module proxy this project builds from, so this stands in for it: the
same gRPC LanguageRuntime service, served by the Pulumi SDK's own implementation (the one its
Automation API serves for inline programs), running the project's `__main__.py` in this
process. The engine starts one host per operation with the engine address as last argument
and reads the port from the first line of stdout.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from pulumi.automation._server import LanguageServer
from pulumi.runtime.proto import language_pb2, language_pb2_grpc

# Pulumi's resource monitor sends messages well over gRPC's default 4 MiB.
_MAX_MESSAGE = 400 * 1024 * 1024


class ProjectLanguageServer(LanguageServer):
    """Runs the program named by the request instead of a function given up front."""

    def __init__(self) -> None:
        super().__init__(program=lambda: None)

    def Run(self, request: Any, context: Any) -> Any:
        info = request.info
        directory = Path(info.program_directory or request.program or request.pwd or ".")
        entry = info.entry_point if info.entry_point and info.entry_point != "." else "__main__.py"
        if request.pwd:
            os.chdir(request.pwd)
        sys.path.insert(0, str(directory))
        sys.argv = [str(directory / entry), *request.args[1:]]
        self.program = lambda: runpy.run_path(str(directory / entry), run_name="__main__")
        result = super().Run(request, context)
        if result.error:
            # The SDK's server has already logged the error (pulumi.log.error) before returning it;
            # returned as `error` too, the engine would print it a second time as "an unhandled
            # error occurred: ...". `bail` (RunResponse) says: reported, stop, print nothing more,
            # as upstream's host answers for a RunError.
            return language_pb2.RunResponse(bail=True)
        return result

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        from importlib.metadata import version

        from pulumi.runtime.proto import plugin_pb2

        return plugin_pb2.PluginInfo(version=version("pulumi"))

    def InstallDependencies(self, request: Any, context: Any) -> Any:
        # `uv sync --frozen` made the project's environment; nothing to install here.
        return iter(())

    def GetProgramDependencies(self, request: Any, context: Any) -> Any:
        return language_pb2.GetProgramDependenciesResponse()


def main() -> None:
    options = [
        ("grpc.max_receive_message_length", _MAX_MESSAGE),
        ("grpc.max_send_message_length", _MAX_MESSAGE),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(ProjectLanguageServer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    # The engine ends its plugins with SIGINT (then SIGKILL): stop quietly, no traceback.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: server.stop(0))
    server.wait_for_termination()


if __name__ == "__main__":
    main()
