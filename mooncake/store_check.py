#!/usr/bin/env python3
"""Put and get a KV block through the Mooncake store, using only a rendered store config.

Reads the JSON that SGLang's HiCache backend reads (SGLANG_HICACHE_MOONCAKE_CONFIG_PATH):
master address, metadata server, protocol, devices, this node's hostname. Only the segment
this check contributes is its own (small) size, so it can run beside a serving node.

    store_check.py CONFIG                    put, get back, compare, remove (exit 0 = ok)
    store_check.py CONFIG --put KEY --hold S put KEY's block and keep serving it S seconds
    store_check.py CONFIG --get KEY          get KEY's block and compare with what --put wrote
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import urllib.request

MIB = 1024 * 1024
BLOCK_BYTES = 4 * MIB  # about one page-first KV block of a large model


def block_for(key: str) -> bytes:
    """Deterministic bytes per key, so another host can check what it got."""
    out, counter = bytearray(), 0
    while len(out) < BLOCK_BYTES:
        out += hashlib.sha256(f"{key}/{counter}".encode()).digest() * 64
        counter += 1
    return bytes(out[:BLOCK_BYTES])


def segments(config: dict) -> list[str]:
    """Segments the master has mounted (host:port per store client)."""
    host = config["master_server_address"].rsplit(":", 1)[0]
    port = config.get("master_metrics_port", 9003)
    with urllib.request.urlopen(f"http://{host}:{port}/get_all_segments", timeout=10) as resp:
        return resp.read().decode().split()


def connect(config: dict, segment_mib: int):
    from mooncake.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    rc = store.setup(
        config["local_hostname"],
        config["metadata_server"],
        segment_mib * MIB,
        16 * MIB,
        config["protocol"],
        config.get("device_name", ""),
        config["master_server_address"],
    )
    if rc != 0:
        raise SystemExit(f"store setup failed (rc {rc}) with {config['master_server_address']}")
    return store


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--put")
    parser.add_argument("--hold", type=float, default=0)
    parser.add_argument("--get")
    args = parser.parse_args()
    with open(args.config) as f:
        config = json.load(f)
    store = connect(config, args.segment_mib)
    mine = [s for s in segments(config) if s.rsplit(":", 1)[0] == config["local_hostname"]]
    result: dict = {"host": config["local_hostname"], "protocol": config["protocol"], "segment": mine}
    if not mine:
        result["error"] = "the master lists no segment of this host"
    elif args.get:
        got = store.get(args.get)
        result.update(key=args.get, bytes=len(got), match=bytes(got) == block_for(args.get))
    else:
        key = args.put or f"flashfleet-store-check/{config['local_hostname']}/{os.getpid()}-{time.time_ns()}"
        block = block_for(key)
        rc = store.put(key, block)
        got = store.get(key) if rc == 0 else b""
        result.update(key=key, put_rc=rc, bytes=len(got), match=bytes(got) == block)
        if not args.put:
            store.remove(key)
    ok = "error" not in result and result.get("match") is True
    print(json.dumps({"ok": ok, **result}), flush=True)
    if ok and args.hold:
        time.sleep(args.hold)  # keep the segment (and the block in it) served
    store.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
