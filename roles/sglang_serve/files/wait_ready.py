#!/usr/bin/python3
"""Waits until every URL answers 200 (a server's /health): gates a unit on the ones it starts after."""

import argparse
import sys
import time
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("--timeout", type=float, required=True)
parser.add_argument("urls", nargs="+")
args = parser.parse_args()
deadline = time.monotonic() + args.timeout
for url in args.urls:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"{url} not ready after {args.timeout:.0f} s")
        time.sleep(2)
