"""`flashfleet offers [--gpu G] [--region R]`: the AWS instance types flashfleet provisions, their
regions and on-demand prices, from the catalog alone (like `dstack offer`, `sky show-gpus`).

No cloud call, no credentials: every figure is the catalog's (flashfleet/catalog/instances.toml),
each price with its public source and date, and "unknown" where no public price was found (a
stack can give its own: `nodes.source.instance.priceUsdPerHour`). Capacity Blocks for a stack,
bought and priced live: `flashfleet capacity offers STACK`.
"""

from __future__ import annotations

import argparse
from typing import Any

from flashfleet.cli.common import UsageError, add_format, print_json

NOT_ON_AWS = "runs on existing hosts or Kubernetes (no AWS instance type in the catalog)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("offers", help="instance types, regions and prices of the catalog (offline)")
    p.add_argument("--gpu", default=None, metavar="GPU", help="only this hardware (gb300, h200, mi355x, cpu)")
    p.add_argument("--region", default=None, metavar="REGION", help="only this AWS region's prices")
    add_format(p, "text", "json")
    p.add_argument(
        "--json", dest="format", action="store_const", const="json", help="the same as --format json"
    )
    p.set_defaults(func=run)


def offers(gpu: str | None, region: str | None) -> list[dict[str, Any]]:
    """One row per instance type and region with a listed price; a type with none in the asked
    region (or none at all) gets one row whose price is unknown."""
    from flashfleet.catalog.instances import instance_catalog

    rows = []
    for t in instance_catalog().values():
        if gpu is not None and t.hardware != gpu:
            continue
        base = {
            "instance_type": t.name, "hardware": t.hardware, "gpus": t.gpus, "arch": t.arch,
            "vcpus": t.vcpus, "host_memory_gib": t.host_memory_gib, "capacity": t.capacity,
            "block_price_usd_per_hour": t.block_price_usd_per_hour,
            "block_price_source": t.block_price_source and f"{t.block_price_source} ({t.block_price_date})",
        }  # fmt: skip
        regions = sorted(t.prices_by_region) if region is None else [region]
        priced = [r for r in regions if r in t.prices_by_region]
        for r in priced:
            rows.append(
                {**base, "region": r, "price_usd_per_hour": t.prices_by_region[r],
                 "price_source": f"{t.price_source} ({t.price_date})"}
            )  # fmt: skip
        if not priced:
            why = (
                "no public on-demand price found"
                if not t.prices_by_region
                else f"no listed price in {region} (listed: {', '.join(sorted(t.prices_by_region))})"
            )
            if t.capacity == "block-only":
                why = f"Capacity Blocks only; {why} (`flashfleet capacity offers STACK` asks AWS)"
            rows.append({**base, "region": region, "price_usd_per_hour": None, "price_source": why})
    return rows


def _known_gpus() -> list[str]:
    from flashfleet.catalog import hardware_catalog
    from flashfleet.catalog.instances import instance_catalog

    return sorted({*hardware_catalog(), *(t.hardware for t in instance_catalog().values())})


def _not_on_aws() -> list[str]:
    from flashfleet.catalog import hardware_catalog
    from flashfleet.catalog.instances import instance_catalog

    on_aws = {t.hardware for t in instance_catalog().values()}
    return sorted(h for h in hardware_catalog() if h not in on_aws)


def run(args: argparse.Namespace) -> int:
    gpu = args.gpu.lower() if args.gpu else None
    if gpu is not None and gpu not in _known_gpus():
        from flashfleet.suggest import did_you_mean

        known = _known_gpus()
        raise UsageError(
            f"--gpu {args.gpu}: no such hardware (known: {', '.join(known)}){did_you_mean(gpu, known)}"
        )
    rows = offers(gpu, args.region)
    if args.format == "json":
        print_json(rows)
        return 0
    elsewhere = [h for h in _not_on_aws() if gpu in (None, h)]
    if not rows:
        print("\n".join(f"{h}: {NOT_ON_AWS}" for h in elsewhere))
        return 0
    from flashfleet.table import aligned

    sources: list[str] = []
    cells = [["TYPE", "GPU", "GPUS", "ARCH", "CAPACITY", "REGION", "USD/HOUR", "SOURCE"]]
    for row in rows:
        price = row["price_usd_per_hour"]
        if price is None:
            note = row["price_source"]
        else:
            if row["price_source"] not in sources:
                sources.append(row["price_source"])
            note = f"[{sources.index(row['price_source']) + 1}]"
        cells.append(
            [row["instance_type"], row["hardware"], str(row["gpus"]), row["arch"], row["capacity"],
             row["region"] or "-", "unknown" if price is None else f"{price:.4f}", note]
        )  # fmt: skip
    print("\n".join(aligned(cells, right=(2, 6))))
    for i, source in enumerate(sources, 1):
        print(f"[{i}] {source}")
    for h in elsewhere:
        print(f"{h}: {NOT_ON_AWS}")
    return 0
