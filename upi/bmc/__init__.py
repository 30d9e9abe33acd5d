"""Bare-metal nodes over Redfish (sushy): power, one-time network boot, and the state of each."""

from upi.bmc.flow import BootMetalResult, MetalBoot, PowerResult, boot_metal, chosen_nodes, power
from upi.bmc.redfish import BmcError, BootOverride, SystemState, Target

__all__ = ["BmcError", "BootMetalResult", "BootOverride", "MetalBoot", "PowerResult", "SystemState",
           "Target", "boot_metal", "chosen_nodes", "power"]
