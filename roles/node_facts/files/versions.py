"""Prints {distribution: version or null} as JSON for the names given; imports none of them."""

import json
import sys
from importlib import metadata


def version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


print(json.dumps({name: version(name) for name in sys.argv[1:]}))
