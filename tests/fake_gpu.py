"""Fake GPU day-2 operators: what NFD, OLM and the NVIDIA GPU Operator do to a cluster.

This is a fake, not a mock: it implements the operators' documented behaviour
(../shared/reference/gpu-day2.md) against the objects in the fake API server,
so upi's flow meets the same state changes a real cluster would show.
"""

from __future__ import annotations

from typing import Any

import yaml

NFD_PREFIX = "feature.node.kubernetes.io/"
# nfd-worker's defaults when the config names none (upstream pci source).
DEFAULT_CLASSES = ["03", "0b40", "12"]
DEFAULT_FIELDS = ["class", "vendor"]


def nfd_labels(config_data: str | None, devices: list[dict[str, str]]) -> dict[str, str]:
    """The PCI labels nfd-worker publishes for `devices` under a worker config.

    A device counts when its class starts with a whitelisted class; the label
    joins the device's `deviceLabelFields` values with `_`.
    """
    config = (yaml.safe_load(config_data) if config_data else None) or {}
    pci: dict[str, Any] = ((config.get("sources") or {}).get("pci")) or {}
    classes = [str(c) for c in pci.get("deviceClassWhitelist") or DEFAULT_CLASSES]
    fields = [str(f) for f in pci.get("deviceLabelFields") or DEFAULT_FIELDS]
    labels = {}
    for dev in devices:
        if any(dev["class"].startswith(c) for c in classes):
            name = "_".join(dev[f] for f in fields)
            labels[f"{NFD_PREFIX}pci-{name}.present"] = "true"
    return labels
