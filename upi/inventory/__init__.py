"""The inventory: model, loader and rules."""

from upi.inventory.loader import load_inventory, parse_inventory
from upi.inventory.model import Firmware, Inventory, Machine, NetworkType, Node, Role

__all__ = [
    "Firmware",
    "Inventory",
    "Machine",
    "NetworkType",
    "Node",
    "Role",
    "load_inventory",
    "parse_inventory",
]
