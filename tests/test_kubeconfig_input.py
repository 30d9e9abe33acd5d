"""Every kubeconfig is input (issue 24): broken ones x every command that reads one.

Each broken kubeconfig is derived from the FAKE API server's admin
kubeconfig (tests/fake_apiserver.py, shaped like openshift-install's
auth/kubeconfig). Whichever command reads it -- approve-csr, gpu, status,
wait, boot-metal --watch -- ends with exit 2 and one paragraph naming the kubeconfig and the
field, never a traceback, and never hangs on a FIFO named in it.
"""

from __future__ import annotations

import base64
import copy
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import inventory_path
from csr_cases import client
from fake_apiserver import FakeApiServer
from test_approve_csr import add
from wait_support import make_assets

from upi.cli import app

INVENTORY = inventory_path("dgxpod")
Edit = Callable[[dict[str, Any], Path], Any]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _user(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["users"][0]["user"]


def _cluster(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["clusters"][0]["cluster"]


def _fifo(where: Path, name: str) -> str:
    path = where / name
    os.mkfifo(path)
    return str(path)


def _set(d: dict[str, Any], key: str, value: Any) -> None:
    d[key] = value


def _user_is(value: dict[str, Any]) -> Edit:
    return lambda doc, where: _set(doc["users"][0], "user", value)


def _ca_file(make: Callable[[Path], str]) -> Edit:
    def edit(doc: dict[str, Any], where: Path) -> None:
        del _cluster(doc)["certificate-authority-data"]
        _cluster(doc)["certificate-authority"] = make(where)
    return edit


def _cert_files(doc: dict[str, Any], where: Path) -> None:
    user = _user(doc)
    del user["client-certificate-data"], user["client-key-data"]
    user["client-certificate"], user["client-key"] = _fifo(where, "cert"), str(where / "key")


# name -> (edit of the parsed kubeconfig, or the raw text; the field the message names; its words)
BROKEN: dict[str, tuple[Edit | str, str, str]] = {
    "a list": ("- apiVersion: v1\n- kind: Config\n", "", "the kubeconfig is a list, not a mapping"),
    "a string": ("just words\n", "", "the kubeconfig is a string, not a mapping"),
    "empty": ("", "", "the kubeconfig is empty"),
    "not YAML": ("clusters: [\n", "", "the kubeconfig is not YAML"),
    "two documents": ("a: 1\n---\nb: 2\n", "", "the kubeconfig is not YAML: but found another document"),
    "no current-context": (lambda doc, w: doc.pop("current-context"), "current-context", "is missing"),
    "current-context a list": (lambda doc, w: _set(doc, "current-context", ["admin"]), "current-context",
                               "is a list, not a string"),
    "unknown current-context": (lambda doc, w: _set(doc, "current-context", "nope"), "current-context",
                                "names 'nope', which is not in contexts"),
    "no contexts": (lambda doc, w: doc.pop("contexts"), "current-context",
                    "names 'admin', which is not in contexts"),
    "contexts a mapping": (lambda doc, w: _set(doc, "contexts", {"admin": {}}), "contexts",
                           "is a mapping, not a list"),
    "context without cluster": (lambda doc, w: doc["contexts"][0]["context"].pop("cluster"),
                                "contexts[0].context.cluster", "is missing"),
    "unknown user": (lambda doc, w: _set(doc["contexts"][0]["context"], "user", "ghost"),
                     "contexts[0].context.user", "names 'ghost', which is not in users"),
    "no clusters": (lambda doc, w: doc.pop("clusters"), "contexts[0].context.cluster",
                    "names 'fake', which is not in clusters"),
    "server a number": (lambda doc, w: _set(_cluster(doc), "server", 6443), "clusters[0].cluster.server",
                        "is a number, not a string"),
    "insecure as words": (lambda doc, w: _set(_cluster(doc), "insecure-skip-tls-verify", "no thanks"),
                          "clusters[0].cluster.insecure-skip-tls-verify", "is a string, not true or false"),
    "CA data not base64": (lambda doc, w: _set(_cluster(doc), "certificate-authority-data", "%%%"),
                           "clusters[0].cluster.certificate-authority-data", "is not base64"),
    "CA data not PEM": (lambda doc, w: _set(_cluster(doc), "certificate-authority-data", _b64(b"hello")),
                        "clusters[0].cluster.certificate-authority", "not PEM CA certificates"),
    "CA a FIFO": (_ca_file(lambda w: _fifo(w, "ca")), "clusters[0].cluster.certificate-authority",
                  "is a FIFO (named pipe), not a regular file"),
    "CA a directory": (_ca_file(lambda w: str(w)), "clusters[0].cluster.certificate-authority",
                       "is a directory, not a regular file"),
    "CA missing": (_ca_file(lambda w: "no-such-ca.crt"), "clusters[0].cluster.certificate-authority",
                   "no-such-ca.crt does not exist"),
    "client certificate a FIFO": (_cert_files, "users[0].user.client-certificate",
                                  "is a FIFO (named pipe), not a regular file"),
    "key without certificate": (lambda doc, w: _user(doc).pop("client-certificate-data"), "users[0].user",
                                "has a client certificate or key without its client-certificate"),
    "auth-provider": (_user_is({"auth-provider": {"name": "oidc", "config": {"idp-issuer-url": "x"}}}),
                      "users[0].user.auth-provider", "upi does not run auth providers"),
    "tokenFile missing": (_user_is({"tokenFile": "no-such-token"}), "users[0].user.tokenFile",
                          "no-such-token does not exist"),
    "tokenFile a FIFO": (lambda doc, w: _set(doc["users"][0], "user", {"tokenFile": _fifo(w, "token")}),
                         "users[0].user.tokenFile", "is a FIFO (named pipe), not a regular file"),
    "token with a line break": (_user_is({"token": "abc\nX-Evil: 1"}), "users[0].user.token",
                                "holds no usable bearer token"),
    "user a list": (lambda doc, w: _set(doc["users"][0], "user", ["token"]), "users[0].user",
                    "is a list, not a mapping"),
    "exec of an unknown apiVersion": (_user_is({"exec": {"apiVersion": "client.authentication.k8s.io/v0",
                                                         "command": "true"}}),
                                      "users[0].user.exec.apiVersion", "is not client.authentication"),
    "exec without command": (_user_is({"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}),
                             "users[0].user.exec.command", "is missing"),
}


def broken_kubeconfig(fake: FakeApiServer, where: Path, case: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    edit, _, _ = BROKEN[case]
    path = where / "kubeconfig"
    if isinstance(edit, str):
        path.write_text(edit)
        return path
    doc = copy.deepcopy(yaml.safe_load(fake.kubeconfig.read_text()))
    edit(doc, where)
    path.write_text(yaml.safe_dump(doc))
    return path


def _args(command: str, kubeconfig: Path, tmp_path: Path, runner) -> list[str]:
    if command == "approve-csr":
        return ["approve-csr", str(INVENTORY), "--kubeconfig", str(kubeconfig), "--once"]
    if command == "gpu":
        return ["gpu", str(INVENTORY), "--kubeconfig", str(kubeconfig), "--timeout", "0.1"]
    if command == "boot-metal":
        return ["boot-metal", str(INVENTORY), "--watch", "-o", str(tmp_path / "render"),
                "--kubeconfig", str(kubeconfig)]
    if command == "status":
        return ["status", str(INVENTORY), "--kubeconfig", str(kubeconfig), "--dnsmasq-log", os.devnull]
    assets = make_assets(runner, INVENTORY, tmp_path / "wait")
    return ["wait", str(INVENTORY), "--dir", str(assets), "--kubeconfig", str(kubeconfig),
            "--retry-pause", "0", "--keep-bootstrap", "--no-vms"]


COMMANDS = ["approve-csr", "gpu", "status", "wait", "boot-metal"]


@pytest.mark.timeout(60)  # a FIFO that blocked would hang here
@pytest.mark.usefixtures("fake_openshift_install")
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", BROKEN)
def test_an_unusable_kubeconfig_is_exit_2_naming_file_and_field(runner, kube, tmp_path, command,
                                                                  case) -> None:
    add(kube, client("master-0"))
    kubeconfig = broken_kubeconfig(kube, tmp_path / "kc", case)
    _, field, words = BROKEN[case]
    result = runner.invoke(app, _args(command, kubeconfig, tmp_path, runner))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"upi: error: {kubeconfig}"), result.stderr
    assert f": {field}: " in result.stderr if field else True
    assert words in result.stderr, result.stderr
    assert kube.approved() == set()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.usefixtures("fake_openshift_install")
def test_a_kubeconfig_that_is_a_fifo_or_a_directory_is_refused_unread(runner, kube, tmp_path,
                                                                     command) -> None:
    for kind in ("fifo", "dir"):
        path = tmp_path / f"{kind}-kubeconfig"
        os.mkfifo(path) if kind == "fifo" else path.mkdir()
        result = runner.invoke(app, _args(command, path, tmp_path / kind, runner))
        assert "Traceback" not in result.output
        assert result.exit_code == 2, (kind, result.output)
        what = "a FIFO (named pipe)" if kind == "fifo" else "a directory"
        assert f"kubeconfig {path} is {what}, not a regular file" in result.stderr, result.stderr


# --- what works: tokens (inline, from a file, from an exec plugin) --------------------------------

def _token_kubeconfig(kube: FakeApiServer, where: Path, user: dict[str, Any]) -> Path:
    doc = yaml.safe_load(kube.kubeconfig.read_text())
    doc["users"][0]["user"] = user
    path = where / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_token_a_token_file_and_an_exec_plugin_each_authenticate(runner, kube, tmp_path) -> None:
    kube.user_tokens = {"sha256~inline", "sha256~fromfile", "sha256~fromplugin"}
    (tmp_path / "token").write_text("sha256~fromfile\n")
    plugin = tmp_path / "plugin"
    plugin.write_text(f"#!{sys.executable}\nimport json, os\n"
                      "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
                      "assert info['spec']['interactive'] is False\n"
                      "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
                      " 'status': {'token': 'sha256~fromplugin'}}))\n")
    plugin.chmod(0o755)
    users = {"token": {"token": "sha256~inline"}, "tokenFile": {"tokenFile": "token"},
             "exec": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}}
    for name, user in users.items():
        add(kube, client("master-0"))
        path = _token_kubeconfig(kube, tmp_path, user)
        result = runner.invoke(app, ["approve-csr", str(INVENTORY), "--kubeconfig", str(path), "--once",
                                     "--dry-run"])
        assert result.exit_code == 0, (name, result.output)
        assert "would-approve client-master-0" in result.stdout, (name, result.output)


def test_a_refused_token_is_exit_1_and_never_printed(runner, kube, tmp_path) -> None:
    path = _token_kubeconfig(kube, tmp_path, {"token": "sha256~not-this-one"})
    result = runner.invoke(app, ["approve-csr", str(INVENTORY), "--kubeconfig", str(path), "--once"])
    assert result.exit_code == 1, result.output
    assert "HTTP 401" in result.stderr
    assert "not-this-one" not in result.output


def test_a_rotated_token_file_is_read_again_on_a_401(kube, tmp_path) -> None:
    from upi.csr.api import Api
    from upi.csr.connect import connect

    token = tmp_path / "token"
    token.write_text("sha256~before\n")
    conn = connect(_token_kubeconfig(kube, tmp_path, {"tokenFile": str(token)}))
    try:
        token.write_text("sha256~after\n")  # the kubelet rotates a service account token this way
        kube.user_tokens = {"sha256~after"}
        Api(conn.http).list("/api/v1/nodes")
    finally:
        conn.close()


def test_the_client_key_is_gone_from_disk_once_connected(kube, tmp_path, monkeypatch) -> None:
    import tempfile

    from upi.csr.connect import connect

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    connect(kube.kubeconfig).close()
    assert list(private.iterdir()) == []


def test_in_a_pod_the_service_account_is_read_bounded_too(tmp_path, monkeypatch) -> None:
    from upi.csr.kubeconfig import in_cluster
    from upi.errors import UsageError

    account = tmp_path / "sa"
    account.mkdir()
    (account / "ca.crt").write_text("PEM")
    (account / "token").write_text("sha256~pod\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    access = in_cluster(account)
    assert (access.server, access.token, access.token_file) == ("https://[fd00::1]:443", "sha256~pod",
                                                                 account / "token")
    (account / "token").unlink()
    os.mkfifo(account / "token")
    with pytest.raises(UsageError, match=r"token is a FIFO \(named pipe\), not a regular file"):
        in_cluster(account)
