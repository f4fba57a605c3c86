"""flashfleet.bringup.redaction and the secret rule: every shape of key, in every form it can take in
Ansible's output, is replaced in the decoded event, and the event keeps its structure."""

from __future__ import annotations

import base64
import json
import math
import re
import textwrap
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pytest

from flashfleet.bringup.errors import BringupInputError
from flashfleet.bringup.redaction import REDACTED, Redactor, redact
from flashfleet.bringup.secret_env import check_secret

# The shapes the review found written unredacted: a quote, a backslash, a tab, non-ASCII.
KEYS = {
    "quote": 'sk-live"Q7v9mWc2LxR1p',
    "backslash": "sk-live\\Q7v9mWc2LxR1p\\n",
    "tab": "sk-live\tQ7v9mWc2LxR1p",
    "non-ascii": "sk-livé-Q7v9mWc2中文-LxR1p",
    "both quotes": "sk-'single'\"double\"-Q7v9mW",
    "hf token": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
    # base64 `c2stbGl2ZX5+flE3djk/Pz9t...`, URL-safe `...ZX5-flE3djk_Pz9t...`: the two alphabets differ
    "base64 alphabets differ": "sk-live~~~Q7v9???mWc2LxR1p",
}


@dataclass
class ServerArgs:  # how SGLang logs its arguments at start-up: `server_args=ServerArgs(...)`
    api_key: str
    port: int = 30000


def forms(key: str) -> dict[str, str]:
    """Text that carries `key`, built the way each producer builds it (not with the module's helpers)."""
    return {
        "raw": f"Authorization: Bearer {key}",
        "json": json.dumps({"api_key": key}),
        "json, unicode": json.dumps({"api_key": key}, ensure_ascii=False),
        "json in json": json.dumps({"stdout": json.dumps({"api_key": key})}),
        "repr": f"server_args={ServerArgs(key)!r}",
        "repr with a quote beside it": repr(f"it's {key}"),
        "repr with both quotes beside it": repr(f'it\'s "{key}"'),
        "ascii": ascii(key),
        "repr in json": json.dumps({"stdout": f"server_args={ServerArgs(key)!r}"}),
        "url": "http://hub/x?token=" + urllib.parse.quote(key, safe=""),
        "url, path": "http://hub/" + urllib.parse.quote(key),
        "url, plus": "token=" + urllib.parse.quote_plus(key),
        "url, lower hex": "token=" + re.sub("%..", lambda m: m[0].lower(), urllib.parse.quote(key, safe="")),
        "base64": "Basic " + base64.b64encode(key.encode()).decode(),
        "base64, urlsafe": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "wrapped at 10": "\n".join(textwrap.wrap(key, 10, break_on_hyphens=False)),
        "wrapped, indented": "key:\n  " + "\n  ".join(key[i : i + 7] for i in range(0, len(key), 7)),
        "wrapped, json-escaped": json.dumps(key[:9] + "\r\n" + key[9:]),
        "base64, mime lines": base64.encodebytes((key * 4).encode()).decode(),
    }


def leftovers(text: str, key: str) -> list[str]:
    """Copies of `key` that survive in `text`: the producer's forms, searched independently."""
    quoted = {key, json.dumps(key)[1:-1], repr(key)[1:-1], repr("'\"" + key)[4:-1], ascii(key)[1:-1]}
    needles = quoted | {json.dumps(q)[1:-1] for q in quoted} | {urllib.parse.quote(key, safe="")}
    needles |= {urllib.parse.quote_plus(key)}
    needles |= {
        encode(key.encode()).decode().rstrip("=") for encode in (base64.b64encode, base64.urlsafe_b64encode)
    }
    needles |= {re.sub("%..", lambda m: m[0].lower(), n) for n in needles}
    return [n for n in needles if n in text or squeeze(n) in squeeze(text)]


def squeeze(text: str) -> str:
    """Without whitespace and escaped line breaks: how a wrapped copy reads."""
    return "".join(text.split()).replace("\\r", "").replace("\\n", "")


@pytest.mark.parametrize("shape", KEYS)
@pytest.mark.parametrize("form", forms("x"))
def test_every_form_of_every_shape_is_replaced(shape: str, form: str) -> None:
    key = KEYS[shape]
    text = forms(key)[form]
    assert leftovers(text, key), "the form carries the key before redaction"
    event = {"event": "verbose", "stdout": text, "event_data": {"res": {"msg": [text]}}}
    out = redact(event, [key])
    assert leftovers(out["stdout"], key) == []
    assert leftovers(out["event_data"]["res"]["msg"][0], key) == []
    assert REDACTED in out["stdout"]


@pytest.mark.parametrize("shape", KEYS)
def test_a_key_split_by_a_newline_at_any_point_is_replaced(shape: str) -> None:
    key = KEYS[shape]
    redactor = Redactor.of([key])
    for cut in range(1, len(key)):
        text = f"line one\n{key[:cut]}\n{key[cut:]} end"
        assert redactor.text(text) == f"line one\n{REDACTED} end", cut


@pytest.mark.parametrize("shape", ["non-ascii", "base64 alphabets differ"])
@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_of_a_longer_text_hides_all_but_two_bytes_at_each_end(
    shape: str, offset: int, encode: Any
) -> None:
    key = KEYS[shape].encode()
    before, after = b"H" * (30 + offset), b"T" * 31
    blob = encode(before + key + after).decode()
    out = Redactor.of([KEYS[shape]]).text(blob)
    left, sep, right = out.partition(REDACTED)
    assert sep, "the core of the encoding was found"
    # a kept character covers 6 bits: the bytes it touches are what could still be decoded
    assert math.ceil(len(left) * 6 / 8) - len(before) <= 2
    assert len(before) + len(key) - math.floor((len(blob) - len(right)) * 6 / 8) <= 2


def test_the_event_keeps_its_structure_and_only_strings_with_a_copy_change() -> None:
    key = KEYS["quote"]
    event: dict[str, Any] = {
        "event": "runner_on_failed",
        "counter": 7,
        "event_data": {
            "host": "n1", "task": "Serve | probe", "ignore_errors": None,
            "res": {"failed": True, "rc": 1, "msg": f"denied for {key}", "changed": False,
                    "env": {key: "as a key", "list": [key, 3, None]}},
        },
    }  # fmt: skip
    out = redact(event, [key])
    assert out["event"] == "runner_on_failed"
    assert out["counter"] == 7
    data = out["event_data"]
    assert (data["host"], data["task"], data["ignore_errors"]) == ("n1", "Serve | probe", None)
    res = data["res"]
    assert (res["failed"], res["rc"], res["changed"]) == (True, 1, False)
    assert res["msg"] == f"denied for {REDACTED}"
    assert res["env"] == {REDACTED: "as a key", "list": [REDACTED, 3, None]}
    assert list(res) == list(event["event_data"]["res"])
    assert redact(event, []) is event  # no secret: the event itself


def test_a_secret_never_rewrites_an_event_that_does_not_hold_it() -> None:
    event = {"event": "runner_on_ok", "stdout": "ok: [n1] => changed=true", "event_data": {"res": {}}}
    assert redact(event, [KEYS["hf token"], KEYS["backslash"]]) == event


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("true", "secret-not-event-word"),
        ("failed", "secret-not-event-word"),
        ("ok", "secret-not-event-word"),
        ("changed", "secret-not-event-word"),
        ("runner_on_failed", "secret-not-event-word"),  # 16 characters, and an event name
        ("playbook_on_task", "secret-not-event-word"),  # part of one
        ("Zq9v4T2m", "secret-min-length"),  # 8 characters
        ("hf_Zq9v4T2mWc8", "secret-min-length"),
        ("Zq9v4T2m \t Wc8LxR1", "secret-min-length"),  # whitespace does not count
    ],
)
def test_secrets_too_short_or_too_common_are_refused_naming_the_variable(value: str, rule: str) -> None:
    with pytest.raises(BringupInputError) as info:
        check_secret("FLASHFLEET_API_KEY", value)
    message = str(info.value)
    assert message.startswith("FLASHFLEET_API_KEY: ")
    assert message.endswith(f"[rule: {rule}]")
    assert "\n" not in message
    assert value not in message.removeprefix("FLASHFLEET_API_KEY: ")


@pytest.mark.parametrize("shape", KEYS)
def test_long_keys_of_every_shape_are_accepted(shape: str) -> None:
    check_secret("FLASHFLEET_API_KEY", KEYS[shape])
    check_secret("FLASHFLEET_API_KEY", "Zq9v4T2mWc8LxR1p")  # exactly 16
    check_secret("FLASHFLEET_API_KEY", None)
