"""`upi boot-metal` against DGX (AMI) firmware as it is in the field: each ends landed, or one line.

The AMI fake's switches (tests/redfish_support.py, with the sources each
follows): the ETag only in the body, 428 for a PATCH without If-Match, 400
OperationSupportedInFutureStateURI for Boot PATCHed on the system, a settings
object listing only pending keys. Landed means read back from the BMC and
applied by the reset; otherwise one line names the node and what the BMC said,
and no reset is sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from redfish_support import AmiFake, Tls, inventory_with_bmcs, write_credentials
from typer.testing import CliRunner

from upi.cli import app

SD = "/redfish/v1/Systems/Self/SD"
SYSTEM = "/redfish/v1/Systems/Self"
PXE_ONCE = {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe",
            "BootSourceOverrideMode": "UEFI"}


def _boot(runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> Any:
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {"worker-0": {
        "address": ami.url, "credentials_file": creds.name, "verify_tls": str(tls.ca_file),
        "timeout": 5.0}})
    return runner.invoke(app, ["boot-metal", str(inv), "--json"])


def _landed(res: Any, ami: AmiFake) -> None:
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["boot_override"] == {"enabled": "Once", "target": "Pxe", "mode": "UEFI"}
    st = ami.state
    assert st.resets == ["On"]
    assert {k: st.boot[k] for k in PXE_ONCE} == PXE_ONCE, "the reset applied the kept override"


def _one_line(res: Any) -> str:
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    lines = [line for line in res.stderr.splitlines() if "worker-0" in line]
    assert len(lines) == 1, res.stderr
    return lines[0]


SWITCHES = {
    "etag only in the body": {"etag_in": "body"},
    "428 without If-Match, etag in the body": {"etag_in": "body", "require_if_match": True},
    "settings object lists only pending keys": {"pending_only": True},
    "future-state URI, pending keys only": {"pending_only": True, "future_state": True},
    "future-state URI, etag in the body": {"future_state": True, "etag_in": "body", "pending_only": True},
}


@pytest.mark.parametrize("switch", SWITCHES)
def test_the_override_lands_on_field_firmware(runner: CliRunner, example_dir: Path, tls: Tls,
                                              ami: AmiFake, switch: str) -> None:
    for key, value in SWITCHES[switch].items():
        setattr(ami.state, key, value)
    res = _boot(runner, example_dir, tls, ami)
    _landed(res, ami)
    kept = [p for p in ami.state.patches if p[3]]
    assert [(p[0], p[1]) for p in kept] == [(SD, '"7"')], ami.state.patches


def test_etag_only_in_the_body_is_sent_as_if_match(runner: CliRunner, example_dir: Path, tls: Tls,
                                                   ami: AmiFake) -> None:
    ami.state.etag_in = "body"
    _landed(_boot(runner, example_dir, tls, ami), ami)
    assert all(p[1] is not None for p in ami.state.patches), ami.state.patches


def test_428_with_no_etag_anywhere_is_retried_after_a_fresh_get(runner: CliRunner, example_dir: Path,
                                                                tls: Tls, ami: AmiFake) -> None:
    ami.state.etag_in = "none"
    ami.state.require_if_match = True
    _landed(_boot(runner, example_dir, tls, ami), ami)
    assert [(p[0], p[1], p[3]) for p in ami.state.patches] == [(SD, None, False), (SD, "*", True)]
    gets = [s[1] for s in ami.state.seen if s[0] == "GET" and s[1] == SD]
    assert len(gets) >= 3, "the retry follows a fresh GET of the settings object"


def test_future_state_refusal_moves_the_patch_to_the_settings_object(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.pending_only = True
    ami.state.future_state = True
    _landed(_boot(runner, example_dir, tls, ami), ami)
    assert [(p[0], p[3]) for p in ami.state.patches] == [(SYSTEM, False), (SD, True)]


def test_a_refusal_is_one_line_with_what_the_bmc_said(runner: CliRunner, example_dir: Path, tls: Tls,
                                                      ami: AmiFake) -> None:
    ami.state.sd_patch_error = (400, "Base.1.8.1.PropertyValueNotInList",
                                "The value Pxe for the property BootSourceOverrideTarget is not in the "
                                "list of acceptable values.")
    line = _one_line(_boot(runner, example_dir, tls, ami))
    assert line == (f"upi: error: worker-0 (BMC {ami.url}): HTTP 400 to PATCH {SD} while setting a "
                    "one-time network boot: The value Pxe for the property BootSourceOverrideTarget is "
                    "not in the list of acceptable values. (Base.1.8.1.PropertyValueNotInList)")
    assert ami.state.resets == []


def test_an_override_dropped_everywhere_is_one_line_naming_each_place(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.etag_in = "none"  # no ETag, no 428: this firmware drops the PATCH without a word
    line = _one_line(_boot(runner, example_dir, tls, ami))
    assert line == (f"upi: error: worker-0 (BMC {ami.url}): asked for a one-time UEFI network boot, "
                    "but the BMC kept target=None mode=UEFI: the change was dropped "
                    f"(PATCH {SD}: accepted, not kept; PATCH {SYSTEM}: accepted, not kept)")
    assert ami.state.resets == []


def test_future_state_then_a_refusing_settings_object_is_one_line(
        runner: CliRunner, example_dir: Path, tls: Tls, ami: AmiFake) -> None:
    ami.state.pending_only = True
    ami.state.future_state = True
    ami.state.sd_patch_error = (405, "Base.1.8.1.ActionNotSupported", "PATCH is not supported here.")
    line = _one_line(_boot(runner, example_dir, tls, ami))
    assert f"HTTP 405 to PATCH {SD}" in line and "PATCH is not supported here." in line
    assert ami.state.resets == []
