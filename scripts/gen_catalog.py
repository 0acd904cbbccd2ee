#!/usr/bin/env python3
"""Generate data/aws-catalog.json, the AWS catalog embedded in the binary (include_str!).

Usage: scripts/gen_catalog.py [DATA_DIR] [OUTPUT] [MOTO_INSTANCE_TYPES]
  DATA_DIR defaults to ../shared/data/aws (instance-types.json, on-demand-prices-us-east-1.json, offerings/*.json)
  OUTPUT   defaults to data/aws-catalog.json
  MOTO_INSTANCE_TYPES: moto's own DescribeInstanceTypes resource (moto/ec2/resources/instance_types.json.gz inside
           the moto package, 5.2.5 or later), read for `EbsInfo.EbsOptimizedInfo` and `EbsOptimizedSupport`, which the
           DATA_DIR snapshot leaves out and the instance-ebs-bandwidth label needs. Without it no type has that label.

Only the facts the engine's formulas read are kept (see src/engine/catalog/aws.rs). Output shape:
  {"prices": {"asOf", "region", "currency"},
   "types": [{"name", "vcpu", "memMiB", "arch", "usage", "enis", "ipv4", ...optional facts, "od": price}],
   "regions": {REGION: {"zones": [sorted zone names], "offered": [bitmask per entry of "types"]}}}
Bit i of offered[j] means types[j] is offered in zones[i]. Optional facts are omitted when absent or false so the
file stays small. The output is deterministic: sorted keys, types sorted by name, no whitespace.
"""

import gzip
import json
import os
import sys

# Karpenter lists instance types with processor-info.supported-architecture in {x86_64, arm64} (aws.md 1.1), so
# mac types (arm64_mac, x86_64_mac) never reach the scheduler.
KARPENTER_ARCHES = {"x86_64", "arm64"}


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def compact_type(t, price):
    net = t["NetworkInfo"]
    card_index = net.get("DefaultNetworkCardIndex", 0)
    cards = [c for c in net.get("NetworkCards", []) if c.get("NetworkCardIndex", 0) == card_index]
    card = cards[0] if cards else {}
    proc = t["ProcessorInfo"]
    out = {
        "name": t["InstanceType"],
        "vcpu": t["VCpuInfo"]["DefaultVCpus"],
        "memMiB": t["MemoryInfo"]["SizeInMiB"],
        "arch": proc["SupportedArchitectures"],
        "usage": t["SupportedUsageClasses"],
        # Max pods uses the default network card's ENIs, not NetworkInfo.MaximumNetworkInterfaces (aws.md 1.3).
        "enis": card.get("MaximumNetworkInterfaces", net.get("MaximumNetworkInterfaces", 0)),
        "ipv4": net["Ipv4AddressesPerInterface"],
    }
    if "Hypervisor" in t:
        out["hypervisor"] = t["Hypervisor"]
    if net.get("EncryptionInTransitSupported"):
        out["eit"] = True
    if "BaselineBandwidthInGbps" in card:
        out["bwMbps"] = round(card["BaselineBandwidthInGbps"] * 1000)
    efa = net.get("EfaInfo", {}).get("MaximumEfaInterfaces")
    if efa:
        out["efa"] = efa
    if "Manufacturer" in proc:
        out["cpuMfr"] = proc["Manufacturer"]
    if "SustainedClockSpeedInGhz" in proc:
        out["clockMHz"] = round(proc["SustainedClockSpeedInGhz"] * 1000)
    if t.get("BareMetal"):
        out["metal"] = True
    gpus = t.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        out["gpus"] = [
            {"name": g["Name"], "mfr": g["Manufacturer"], "count": g["Count"], "memMiB": g["MemoryInfo"]["SizeInMiB"]}
            for g in gpus
        ]
    neuron = t.get("NeuronInfo", {}).get("NeuronDevices", [])
    if neuron:
        out["neuron"] = [
            {"name": d["Name"], "count": d["Count"], "cores": d.get("CoreInfo", {}).get("Count", 0)} for d in neuron
        ]
    accels = t.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
    if accels:
        out["accel"] = [{"name": a["Name"], "mfr": a["Manufacturer"], "count": a["Count"]} for a in accels]
    store = t.get("InstanceStorageInfo")
    if store and "TotalSizeInGB" in store:
        out["storeGB"] = store["TotalSizeInGB"]
        if store.get("NvmeSupport", "unsupported") != "unsupported":
            out["nvme"] = True
    # The instance-ebs-bandwidth label needs EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps with support "default".
    ebs_info = t.get("EbsInfo", {})
    ebs = ebs_info.get("EbsOptimizedInfo")
    if ebs and ebs_info.get("EbsOptimizedSupport") == "default" and "MaximumBandwidthInMbps" in ebs:
        out["ebsMbps"] = ebs["MaximumBandwidthInMbps"]
    if price is not None and price > 0:
        out["od"] = price
    return out


def main(argv):
    data_dir = argv[1] if len(argv) > 1 else "../shared/data/aws"
    output = argv[2] if len(argv) > 2 else "data/aws-catalog.json"

    raw = load(os.path.join(data_dir, "instance-types.json"))["instanceTypes"]
    if len(argv) > 3:
        with gzip.open(argv[3], "rt", encoding="utf-8") as f:
            moto = json.load(f)
        for t in raw:
            m = moto.get(t["InstanceType"], {}).get("EbsInfo", {})
            ebs = t.setdefault("EbsInfo", {})
            for key in ("EbsOptimizedInfo", "EbsOptimizedSupport"):
                if key in m and key not in ebs:
                    ebs[key] = m[key]
    prices = load(os.path.join(data_dir, "on-demand-prices-us-east-1.json"))
    table = prices["prices"]

    raw = [
        t
        for t in raw
        if "hvm" in t.get("SupportedVirtualizationTypes", [])
        and KARPENTER_ARCHES & set(t["ProcessorInfo"]["SupportedArchitectures"])
    ]
    raw.sort(key=lambda t: t["InstanceType"])
    types = [compact_type(t, table.get(t["InstanceType"])) for t in raw]
    index = {t["name"]: i for i, t in enumerate(types)}

    regions = {}
    offerings_dir = os.path.join(data_dir, "offerings")
    for fname in sorted(os.listdir(offerings_dir)):
        if not fname.endswith(".json"):
            continue
        doc = load(os.path.join(offerings_dir, fname))
        zones = sorted(doc["zones"])
        if len(zones) > 31:
            raise SystemExit(f"{fname}: too many zones for a bitmask")
        offered = [0] * len(types)
        for bit, zone in enumerate(zones):
            for name in doc["zones"][zone]:
                if name in index:
                    offered[index[name]] |= 1 << bit
        regions[doc["region"]] = {"zones": zones, "offered": offered}

    out = {
        "prices": {"asOf": prices["asOf"], "region": prices["region"], "currency": prices.get("currency", "USD")},
        "types": types,
        "regions": regions,
    }
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        json.dump(out, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {output}: {len(types)} types, {len(regions)} regions, {os.path.getsize(output)} bytes")


if __name__ == "__main__":
    main(sys.argv)
