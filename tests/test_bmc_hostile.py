"""`upi power` against a BMC that answers something that is not Redfish, too slowly or too much.

The fake in tests/fake_http.py speaks TLS with the test CA and sends HTML,
truncated, wrongly shaped or absurdly nested JSON for every path, drips its
answer a byte at a time, never ends a body, or sends more than upi reads: no
real BMC (nor the sushy-tools emulator) does. Each is one line naming the
node and its BMC, exit 1, never a traceback; the other node is still reported.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest
from fake_http import Script, drip, fake_http, response
from redfish_support import inventory_with_bmcs, make_tls, write_credentials

from upi.bmc import bounded
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


def power_status(runner, example_dir: Path, tmp_path: Path, script: Script, *, timeout: float = 2.0):
    """`upi power INV status --json` for worker-0 and worker-1, both BMCs the fake sending `script`."""
    tls = make_tls(tmp_path / "tls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls.cert_file, tls.key_file)
    creds = write_credentials(example_dir / "bmc-admin.yaml")
    with fake_http({}, default=script, ssl_context=ctx) as srv:
        url = f"https://127.0.0.1:{srv.server_address[1]}"
        inv = inventory_with_bmcs(example_dir / "dgxpod.yaml", {
            node: {"address": url, "credentials_file": creds.name, "timeout": timeout,
                   "verify_tls": str(tls.ca_file), "system_id": f"sys-{node}"}
            for node in ("worker-0", "worker-1")})
        result = runner.invoke(app, ["power", str(inv), "status", "--json"])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert {d["node"] for d in json.loads(result.stdout)} == {"worker-0", "worker-1"}
    return url, result


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_bmc_answering_garbage_is_one_line_naming_the_node(runner, example_dir: Path, tmp_path,
                                                             answer) -> None:
    url, result = power_status(runner, example_dir, tmp_path, [response(ANSWERS[answer], headers=JSON)])
    for node in ("worker-0", "worker-1"):
        assert f"{node} (BMC {url}): answered something that is not Redfish JSON" in result.stderr


ROOT_DOC = json.dumps({"@odata.id": "/redfish/v1", "Systems": {"@odata.id": "/redfish/v1/Systems"}}).encode()
CHUNKED = {**JSON, "Transfer-Encoding": "chunked"}
SLOW = {
    # Status line, headers and body one byte at a time, each byte well inside the 0.5 s read timeout.
    "dripped": drip(response(ROOT_DOC, headers=JSON), every=0.05),
    # Headers at once, then a chunked body that goes on for ever, a chunk every 0.1 s.
    "endless body": [response(b"", headers=CHUNKED).replace(b"Content-Length: 0\r\n", b""),
                     *[b"1\r\n \r\n", 0.1] * 10_000],
}


@pytest.mark.parametrize("answer", SLOW)
def test_a_bmc_answering_too_slowly_fails_at_the_request_deadline(runner, example_dir: Path, tmp_path,
                                                                 answer) -> None:
    # bmc.timeout 0.5 s bounds each read; the request as a whole gets twice that.
    url, result = power_status(runner, example_dir, tmp_path, SLOW[answer], timeout=0.5)
    for node in ("worker-0", "worker-1"):
        assert (f"{node} (BMC {url}): no complete answer within 1 s (the BMC sends too slowly or never "
                "ends its answer) while reading the service root") in result.stderr, result.stderr


def test_a_bmc_announcing_a_huge_answer_is_refused_before_reading_it(runner, example_dir: Path,
                                                                     tmp_path) -> None:
    huge = response(b"{}", headers={**JSON, "Content-Length": str(10**12)})
    url, result = power_status(runner, example_dir, tmp_path, [huge])
    for node in ("worker-0", "worker-1"):
        assert (f"{node} (BMC {url}): answered 1,000,000,000,000 bytes, more than upi reads "
                f"({bounded.MAX_ANSWER:,}) while reading the service root") in result.stderr, result.stderr


def test_a_bmc_sending_more_than_the_cap_is_cut_off(runner, example_dir: Path, tmp_path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A lower cap keeps the test quick; the body has no length: only counting what arrives stops it.
    monkeypatch.setattr(bounded, "MAX_ANSWER", 256 * 1024)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    url, result = power_status(runner, example_dir, tmp_path, [head, b"[" + b" " * (1024 * 1024)])
    for node in ("worker-0", "worker-1"):
        assert (f"{node} (BMC {url}): answered more than upi reads (262,144 bytes) while reading "
                "the service root" in result.stderr), result.stderr
