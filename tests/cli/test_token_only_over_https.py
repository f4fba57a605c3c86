"""The HF token is sent only over https: a Hub mirror the stack names with http:// gets no
`Authorization` header from `flashfleet lock` (nor from the nodes' client:
tests/roles/test_model_weights_job.py), unless the stack's site section says
`hub: {tokenOverHttp: true}`. A capture server on 127.0.0.1 stands in for the mirror
and records every header it is sent."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from flashfleet.cli import main
from flashfleet.cli.lock import token_may_go
from flashfleet.stack import DEFAULT_STACKS_DIR

TOKEN = "hf_captureTESTtoken0123456789abcdef"


class Capture:
    """An HTTP server that answers 404 to everything and keeps each request's Authorization."""

    def __init__(self) -> None:
        seen: list[str | None] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                seen.append(self.headers.get("Authorization"))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_HEAD = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def capture() -> Iterator[Capture]:
    server = Capture()
    yield server
    server.server.shutdown()


def _stack(folder: Path, hub: dict[str, Any]) -> None:
    path = folder / "Pulumi.h200-lowlat.yaml"
    shutil.copy(DEFAULT_STACKS_DIR / path.name, path)
    doc = yaml.safe_load(path.read_text())
    doc["config"]["flashfleet:stack"]["site"] = {"hub": hub}
    path.write_text(yaml.safe_dump(doc))


def test_lock_sends_no_token_to_an_http_mirror(
    tmp_path: Path, capture: Capture, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _stack(tmp_path, {"endpoint": capture.url})
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert capture.seen, "the mirror was asked"
    assert capture.seen == [None] * len(capture.seen)
    assert f"{capture.url} is not https: HF_TOKEN is not sent to it" in err
    assert TOKEN not in err


def test_lock_sends_the_token_over_http_only_where_the_stack_says_so(
    tmp_path: Path, capture: Capture, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    _stack(tmp_path, {"endpoint": capture.url, "tokenOverHttp": True})
    assert main(["lock", "h200-lowlat", "--stacks-dir", str(tmp_path)]) == 1
    assert "not https" not in capsys.readouterr().err
    assert capture.seen
    assert f"Bearer {TOKEN}" in capture.seen  # the capture does see a token when one is sent


@pytest.mark.parametrize(
    ("endpoint", "over_http", "goes"),
    [
        (None, False, True),
        ("https://huggingface.co", False, True),
        ("HTTPS://mirror.example:8443/hf", False, True),
        ("http://mirror.example", False, False),
        ("http://127.0.0.1:8080", False, False),
        ("http://mirror.example", True, True),
        ("ftp://mirror.example", True, False),
    ],
)
def test_the_rule_is_the_nodes_rule(endpoint: str | None, over_http: bool, goes: bool) -> None:
    import importlib.util

    script = Path(__file__).parents[2] / "roles/model_weights/files/weights_fetch.py"
    spec = importlib.util.spec_from_file_location("weights_fetch", script)
    assert spec is not None
    assert spec.loader is not None
    node = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(node)
    job = node.Job.__new__(node.Job)
    job.req = {"endpoint": endpoint or "https://huggingface.co", "token_over_http": over_http}
    assert token_may_go(endpoint, over_http) is goes
    assert job.token_may_go() is goes


@pytest.mark.parametrize(
    ("hub", "warning"),
    [
        (
            {"endpoint": "http://10.0.0.1:9000"},
            "the HF token is not sent to http://10.0.0.1:9000 (not https)",
        ),
        (
            {"endpoint": "http://10.0.0.1:9000", "tokenOverHttp": True},
            "the HF token goes to http://10.0.0.1:9000 in clear text",
        ),
        ({"endpoint": "https://hf.example"}, None),
    ],
)
def test_plan_says_where_the_token_goes(tmp_path: Path, hub: dict[str, Any], warning: str | None) -> None:
    from flashfleet.planning import load_stack

    _stack(tmp_path, hub)
    path = tmp_path / "Pulumi.h200-lowlat.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["config"]["flashfleet:hfToken"] = {"secure": "v1:AAAA"}
    path.write_text(yaml.safe_dump(doc))
    found = [w for w in load_stack("h200-lowlat", tmp_path).warnings if "HF token" in w]
    if warning is None:
        assert found == []
    else:
        assert len(found) == 1, found
        assert warning in found[0]
