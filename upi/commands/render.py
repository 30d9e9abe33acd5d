"""`upi render` and `upi schema`: the library calls behind them (validate: validate.py).

The render itself is the render directory's transaction, in the library
(upi.renderdir): `upi wait` and the local-boot flip write DIR through it too.
"""

from __future__ import annotations

import json

from upi.renderdir import RenderResult, render

__all__ = ["RenderResult", "render", "schema"]


def schema() -> str:
    """The inventory's JSON Schema, for editors (yaml-language-server)."""
    from upi.inventory.schema import inventory_schema

    return json.dumps(inventory_schema(), indent=2) + "\n"
