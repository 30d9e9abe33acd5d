"""`upi power` against a BMC that answers something that is not Redfish.

The fake in tests/fake_http.py speaks TLS with the test CA and sends HTML,
truncated, wrongly shaped or absurdly nested JSON for every path: no real
BMC (nor the sushy-tools emulator) does. Each is one line naming the node
and its BMC, exit 1, never a traceback; the other node is still reported.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest
from fake_http import fake_http, response
from redfish_support import inventory_with_bmcs, make_tls, write_credentials

from upi.cli import app

JSON = {"Content-Type": "application/json"}
ANSWERS = {
    "html": b"<html><body>502 Bad Gateway</body></html>",
    "truncated": b'{"Systems": {"@odata.id": "/redfish/v1/Sys',
    "array": b"[1, 2]",
    "wrong shape": b'{"Systems": 5, "SessionService": "x", "Managers": []}',
    "deep": b"[" * 100_000,
    "deep object": b'{"a":' * 50_000,
    "null": b"null",
    "not utf-8": b'{"Systems": "\xff\xfe"}',
}


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_bmc_answering_garbage_is_one_line_naming_the_node(runner, example_dir: Path, tmp_path,
                                                             answer) -> None:
    tls = make_tls(tmp_path / "tls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls.cert_file, tls.key_file)
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    with fake_http({}, default=[response(ANSWERS[answer], headers=JSON)], ssl_context=ctx) as srv:
        url = f"https://127.0.0.1:{srv.server_address[1]}"
        inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {
            node: {"address": url, "credentials_file": creds.name, "timeout": 2.0,
                   "verify_tls": str(tls.ca_file), "system_id": f"sys-{node}"}
            for node in ("worker-0", "worker-1")})
        result = runner.invoke(app, ["power", str(inv), "status", "--json"])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    for node in ("worker-0", "worker-1"):
        assert f"{node} (BMC {url}): answered something that is not Redfish JSON" in result.stderr
    assert {d["node"] for d in json.loads(result.stdout)} == {"worker-0", "worker-1"}
