"""`upi validate` refuses what openshift-install refuses, for the installer's reason.

Each case edits an example inventory. `upi validate` must exit 2 naming the
file, the line and the field, and quote the installer's reason. Then the FAKE
installer (tests/fakes; it speaks as the real one measured in
../shared/reference/real-installer.md) is given the install-config upi would
write for that inventory, built past upi's own rules, at the inventory's
release: it must refuse it (exit 3) for the same reason. So upi and the fake
cannot drift apart, and neither can drift from the reference.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FAKE_OPENSHIFT_INSTALL, inventory_path
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from upi.cli import app
from upi.errors import InventoryError
from upi.facts.installconfig import install_config
from upi.inventory import parse_inventory
from upi.inventory.model import Inventory
from upi.render import install_config_yaml

KEYS = "  ssh_key_file: id_rsa.pub\n"
ED25519 = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHyx1iXxoJ3I8iH2eD3jE1C/H1ZN7xUf0Xc1xEVt3K8m "
           "admin@provisioner\n")
SOURCE = "    - source: quay.io/openshift-release-dev/ocp-release\n"
MIRROR = "mirrors: [mirror.lab.example.com:8443/ocp4/openshift-release-dev]\n    - source: quay.io/" \
    "openshift-release-dev/ocp-v4.0-art-dev"
NO_PROXY = "each element of noProxy must be a IP, CIDR or domain without wildcard characters"


def proxy(*lines: str) -> str:
    """The compact inventory with a proxy block under cluster:."""
    return KEYS + "  proxy:\n" + "".join(f"    {line}\n" for line in lines)


def pull_secret(auths: object, **extra: object) -> str:
    return json.dumps({"auths": auths, **extra})


@dataclass(frozen=True)
class Case:
    """Replace `old` by `new` (and write `files`): the problem is at the line holding `anchor`."""

    id: str
    old: str
    new: str
    anchor: str
    field: str
    reason: str  # the installer's words, in upi's message and in the fake's refusal
    base: str = "compact"
    files: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # For values upi's model refuses on its own: edit the document upi writes for the base.
    config: Callable[[dict[str, Any]], None] | None = None


def _set_cluster_network(cidr: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc["networking"]["clusterNetwork"][0]["cidr"] = cidr
    return edit


def _set_machine_network(cidr: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc["networking"]["machineNetwork"][0]["cidr"] = cidr
    return edit


CASES = [
    Case("name-55", "  name: edge\n", f"  name: {'e' * 55}\n", "  name:", "cluster.name",
         "must be no more than 54 characters"),
    Case("name-63", "  name: edge\n", f"  name: {'a1-' * 20}abc\n", "  name:", "cluster.name",
         "must be no more than 54 characters"),
    Case("fips-ed25519", KEYS, KEYS + "  fips: true\n", "ssh_key_file", "cluster.ssh_key_file",
         "SSH key type ssh-ed25519 unavailable when FIPS is enabled. Please use rsa or ecdsa.",
         files={"id_rsa.pub": ED25519}, env={"FAKE_OPENSHIFT_INSTALL_FIPS_HOST": "1"}),
    Case("http-proxy-https", KEYS, proxy("http_proxy: https://proxy.lab.example.com:3128"),
         "http_proxy", "cluster.proxy.http_proxy",
         'proxy.httpProxy: Unsupported value: "https": supported values: "http"'),
    Case("https-proxy-ftp", KEYS, proxy("https_proxy: ftp://proxy.lab.example.com:3128"),
         "https_proxy", "cluster.proxy.https_proxy",
         'proxy.httpsProxy: Unsupported value: "ftp": supported values: "http", "https"'),
    Case("proxy-host-port-without-scheme", KEYS, proxy("http_proxy: proxy.lab.example.com:3128"),
         "http_proxy", "cluster.proxy.http_proxy",
         'Unsupported value: "proxy.lab.example.com": supported values: "http"'),
    Case("proxy-ip-without-scheme", KEYS, proxy("https_proxy: 192.168.122.5:3128"),
         "https_proxy", "cluster.proxy.https_proxy", "invalid URI for request"),
    Case("proxy-in-cluster-network", KEYS, proxy("http_proxy: http://10.130.7.7:3128"),
         "http_proxy", "cluster.proxy.http_proxy", "proxy value is part of the cluster networks"),
    Case("proxy-in-service-network", KEYS,
         proxy("http_proxy: http://192.168.122.5:3128", "https_proxy: https://172.30.0.9:3129"),
         "https_proxy", "cluster.proxy.https_proxy", "proxy value is part of the service networks"),
    Case("proxy-with-only-no-proxy", KEYS, proxy("no_proxy: [.lab.example.com]"), "  proxy:",
         "cluster.proxy", "proxy: Required value: must include httpProxy or httpsProxy"),
    Case("no-proxy-wildcard", KEYS,
         proxy("http_proxy: http://192.168.122.5:3128", 'no_proxy: ["*.lab.example.com"]'),
         "no_proxy", "cluster.proxy.no_proxy[0]", NO_PROXY),
    Case("no-proxy-star-among-others", KEYS,
         proxy("http_proxy: http://192.168.122.5:3128", "no_proxy:", "  - .lab.example.com",
               '  - "*"'), '  - "*"', "cluster.proxy.no_proxy[1]", NO_PROXY),
    Case("no-proxy-space", KEYS,
         proxy("http_proxy: http://192.168.122.5:3128", 'no_proxy: ["lab.example.com", "a b.com"]'),
         "no_proxy", "cluster.proxy.no_proxy[1]", "noProxy must not have spaces"),
    Case("no-proxy-upper-case", KEYS,
         proxy("https_proxy: http://192.168.122.5:3128", "no_proxy: [Lab.Example.com]"),
         "no_proxy", "cluster.proxy.no_proxy[0]", NO_PROXY),
    Case("no-proxy-with-port", KEYS,
         proxy("https_proxy: http://192.168.122.5:3128", 'no_proxy: ["registry.lab.example.com:5000"]'),
         "no_proxy", "cluster.proxy.no_proxy[0]", NO_PROXY),
    Case("mirror-source-with-tag", SOURCE, "    - source: quay.io/openshift-release-dev/ocp-release:4.18.1\n",
         "ocp-release:4.18.1", "cluster.mirrors[0].source", "must be repository--not reference"),
    Case("mirror-with-digest", MIRROR,
         f"mirrors: [mirror.lab.example.com:8443/ocp4/release@sha256:{'ab' * 32}]\n    - source: quay.io/"
         "openshift-release-dev/ocp-v4.0-art-dev", "@sha256", "cluster.mirrors[0].mirrors[0]",
         "must be repository--not reference"),
    Case("mirror-as-url", MIRROR,
         "mirrors: [https://mirror.lab.example.com:8443/ocp4]\n    - source: quay.io/"
         "openshift-release-dev/ocp-v4.0-art-dev", "https://", "cluster.mirrors[0].mirrors[0]",
         "invalid reference format"),
    Case("mirror-without-registry-host", SOURCE, "    - source: openshift-release-dev/ocp-release\n",
         "source: openshift-release-dev", "cluster.mirrors[0].source", "the repository provided is invalid"),
    Case("mirror-upper-case", SOURCE, "    - source: quay.io/OpenShift-Release-Dev/ocp-release\n",
         "OpenShift-Release-Dev", "cluster.mirrors[0].source", "repository name must be lowercase"),
    Case("mirror-wildcard", SOURCE, '    - source: "*.quay.io"\n', "*.quay.io", "cluster.mirrors[0].source",
         "invalid reference format"),
    Case("mirror-bare-registry-upper-case", MIRROR,
         "mirrors: [Mirror.Lab.example.com:8443]\n    - source: quay.io/"
         "openshift-release-dev/ocp-v4.0-art-dev",
         "Mirror.Lab", "cluster.mirrors[0].mirrors[0]", "repository name must be lowercase"),
    Case("mirror-trailing-slash", SOURCE, "    - source: quay.io/openshift-release-dev/\n",
         "source: quay.io/openshift-release-dev/", "cluster.mirrors[0].source", "invalid reference format"),
    Case("mirror-underscore-host", SOURCE, "    - source: my_registry\n", "my_registry",
         "cluster.mirrors[0].source", "the repository provided is invalid"),
    Case("service-network-in-masquerade", "  upstream_dns:", "  service_network: 169.254.64.0/18\n"
         "  upstream_dns:", "service_network", "network.service_network",
         "must not overlap with OVNKubernetes default masquerade subnet 169.254.0.0/17"),
    Case("cluster-network-over-masquerade", "  upstream_dns:", "  cluster_network: 169.254.0.0/16\n"
         "  upstream_dns:", "cluster_network", "network.cluster_network",
         "must not overlap with OVNKubernetes default masquerade subnet 169.254.0.0/17"),
    Case("join-subnet", "  upstream_dns:", "  service_network: 100.64.8.0/22\n  upstream_dns:",
         "service_network", "network.service_network",
         "must not overlap with OVNKubernetes default internal subnet 100.64.0.0/16"),
    Case("transit-subnet", "  upstream_dns:", "  cluster_network: 100.88.0.0/14\n  upstream_dns:",
         "cluster_network", "network.cluster_network",
         "must not overlap with OVNKubernetes default transit subnet 100.88.0.0/16"),
    Case("openshift-sdn-on-4.16", "  upstream_dns: [10.33.0.10]\n",
         "  upstream_dns: [10.33.0.10]\n  network_type: OpenShiftSDN\n", "network_type",
         "network.network_type", "networkType OpenShiftSDN is not supported, please use OVNKubernetes",
         base="dgxpod"),
    Case("cluster-network-over-machine-network", "  upstream_dns:", "  cluster_network: 192.168.0.0/16\n"
         "  upstream_dns:", "cluster_network", "network.cluster_network",
         "cluster network must not overlap with any of the machine networks"),
    Case("service-network-over-machine-network", "  upstream_dns:", "  service_network: 192.168.122.0/25\n"
         "  upstream_dns:", "service_network", "network.service_network",
         "service network must not overlap with any of the machine networks"),
    Case("cluster-network-over-service-network", "  upstream_dns:", "  cluster_network: 172.16.0.0/12\n"
         "  service_network: 172.30.0.0/16\n  upstream_dns:", "service_network", "network.service_network",
         "cluster network must not overlap with service network 0"),
    Case("host-prefix-below-the-cluster-prefix", "  upstream_dns:", "  host_prefix: 12\n  upstream_dns:",
         "host_prefix", "network.host_prefix",
         "cluster network host subnetwork prefix must not be larger size than CIDR 10.128.0.0/14"),
    Case("cluster-network-host-bits", "  upstream_dns:", "  cluster_network: 10.129.0.0/14\n"
         "  upstream_dns:", "cluster_network", "network.cluster_network",
         "invalid network address. got 10.129.0.0/14, expecting 10.128.0.0/14",
         config=_set_cluster_network("10.129.0.0/14")),
    Case("machine-network-host-bits", "  machine_cidr: 192.168.122.0/24", "  machine_cidr: 192.168.122.7/24",
         "machine_cidr", "network.machine_cidr",
         "invalid network address. got 192.168.122.7/24, expecting 192.168.122.0/24",
         config=_set_machine_network("192.168.122.7/24")),
    Case("pull-secret-entry-without-auth", "", "", "pull_secret_file", "cluster.pull_secret_file",
         '"registry.lab.example.com" requires either auth or credsStore',
         files={"pull-secret.json": pull_secret({"quay.io": {"auth": "dTpw"},
                                                 "registry.lab.example.com": {"email": "a@b.c"}})}),
    Case("pull-secret-entry-not-an-object", "", "", "pull_secret_file", "cluster.pull_secret_file",
         "json: cannot unmarshal string into Go struct field imagePullSecret.auths",
         files={"pull-secret.json": pull_secret({"quay.io": "dTpw"})}),
    Case("pull-secret-nan", "", "", "pull_secret_file", "cluster.pull_secret_file",
         "invalid character 'N' looking for beginning of value",
         files={"pull-secret.json": '{"auths": {"quay.io": {"auth": "dTpw", "n": NaN}}}'}),
    Case("pull-secret-empty-auths", "", "", "pull_secret_file", "cluster.pull_secret_file",
         "auths required", files={"pull-secret.json": pull_secret({})}),
]


def _edited(tmp: Path, case: Case) -> Path:
    base = inventory_path(case.base)
    text = base.read_text()
    if case.old:
        assert text.count(case.old) == 1, f"{case.id}: the edit must match exactly once"
        text = text.replace(case.old, case.new)
    for name in ("pull-secret.json", "id_rsa.pub", "mirror-ca.pem"):
        (tmp / name).write_text((base.parent / name).read_text())
    for name, content in case.files.items():
        (tmp / name).write_text(content)
    path = tmp / f"{case.base}.yaml"
    path.write_text(text)
    return path


def _line_of(path: Path, anchor: str) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if anchor in line)


def config_upi_would_write(path: Path, edit: Callable[[dict[str, Any]], None] | None = None,
                           base: Path | None = None) -> dict[str, Any]:
    """install-config.yaml as upi renders it for `path`, past upi's cross-field rules.

    A value the model itself refuses (host bits) cannot reach the renderer: then
    the document is that of `base` with `edit` applied.
    """
    source = base if edit else path
    inv = Inventory.model_validate(yaml.safe_load(source.read_text()))
    doc = install_config(inv.model_copy(update={"source": path}))
    if edit:
        edit(doc)
    return doc


def fake_create_manifests(tmp: Path, doc: dict[str, Any], version: str,
                          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assets = tmp / "assets"
    assets.mkdir(parents=True)
    (assets / "install-config.yaml").write_text(yaml.safe_dump(doc))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_OPENSHIFT_INSTALL_")}
    environ.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                    "FAKE_OPENSHIFT_INSTALL_VERSION": f"{version}.0", **(env or {})})
    return subprocess.run([str(FAKE_OPENSHIFT_INSTALL), "--dir", str(assets), "create", "manifests"],
                          env=environ, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_upi_and_the_fake_installer_refuse_it_for_the_same_reason(runner, tmp_path: Path, case: Case) -> None:
    path = _edited(tmp_path, case)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    where = f"{path}:{_line_of(path, case.anchor)}: {case.field}: "
    mine = [line for line in result.output.splitlines() if where in line]
    assert mine, f"no problem at {where!r} in:\n{result.output}"
    assert any("(openshift-install: " in line and case.reason in line for line in mine), result.output

    version = yaml.safe_load(path.read_text())["cluster"]["openshift_version"]
    doc = config_upi_would_write(path, case.config, inventory_path(case.base))
    installer = fake_create_manifests(tmp_path, doc, version, case.env)
    assert installer.returncode == 3, installer.stderr
    assert case.reason in installer.stderr.splitlines()[-1], installer.stderr


def test_every_rule_of_the_reference_table_has_a_case() -> None:
    reasons = " ".join(c.reason for c in CASES)
    for fragment in ("54 characters", "ssh-ed25519 unavailable when FIPS", "noProxy must not have spaces",
                     NO_PROXY, '"https": supported values: "http"', "part of the cluster networks",
                     "must include httpProxy or httpsProxy", "repository--not reference",
                     "invalid reference format", "masquerade subnet 169.254.0.0/17",
                     "requires either auth or credsStore", "invalid network address"):
        assert fragment in reasons, fragment


def test_a_name_past_63_characters_names_both_limits(runner, tmp_path: Path) -> None:
    path = _edited(tmp_path, Case("long", "  name: edge\n", f"  name: {'n' * 80}\n", "", "", ""))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:{_line_of(path, '  name:')}: cluster.name: " in result.output
    assert "must be no more than 54 characters" in " ".join(result.output.split())


@pytest.mark.parametrize(("version", "warned"), [("4.11", True), ("4.12", False), ("4.18", False)])
def test_a_trust_bundle_without_a_proxy_before_4_12_warns(runner, tmp_path: Path, version: str,
                                                          warned: bool) -> None:
    path = _edited(tmp_path, Case("tb", '"4.18"', f'"{version}"', "", "", ""))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    said = "cluster.additional_trust_bundle_file without a proxy" in " ".join(result.output.split())
    assert said is warned, result.output
    policy = config_upi_would_write(path).get("additionalTrustBundlePolicy")
    assert policy == (None if warned else "Always")


def test_fips_warns_that_the_installer_must_be_the_fips_one_on_a_fips_host(runner, tmp_path: Path) -> None:
    path = _edited(tmp_path, Case("fips", KEYS, KEYS + "  fips: true\n", "", "", ""))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    reason = ("fips: Forbidden: target cluster is in FIPS mode, use the FIPS-capable installer binary "
              "for RHEL 9 on a host with FIPS enabled.")
    warning = " ".join(result.output.split())
    assert "cluster.fips is true" in warning and reason in warning, result.output
    installer = fake_create_manifests(tmp_path, config_upi_would_write(path), "4.18")
    assert installer.returncode == 3 and reason in installer.stderr, installer.stderr
    on_a_fips_host = fake_create_manifests(tmp_path / "fips", config_upi_would_write(path), "4.18",
                                           {"FAKE_OPENSHIFT_INSTALL_FIPS_HOST": "1"})
    assert on_a_fips_host.returncode == 0, on_a_fips_host.stderr


ACCEPTED = [
    ("no-proxy-star-alone", KEYS, proxy("http_proxy: http://192.168.122.5:3128", 'no_proxy: ["*"]')),
    ("no-proxy-every-form", KEYS, proxy(
        "http_proxy: http://192.168.122.5:3128", "https_proxy: https://proxy.lab.example.com:3129/",
        'no_proxy: [.lab.example.com, lab.example.com, 10.0.0.0/8, 10.1.2.3/8, 192.168.1.5, "fd00::/8"]')),
    ("proxy-with-credentials", KEYS, proxy("http_proxy: http://user:s3cret@192.168.122.5:3128")),
    ("mirror-bare-registry", MIRROR, "mirrors: [mirror.lab.example.com:8443]\n    - source: quay.io/"
     "openshift-release-dev/ocp-v4.0-art-dev"),
    ("mirror-localhost", SOURCE, "    - source: localhost:5000/ocp/release\n"),
    ("mirror-nested-path", SOURCE, "    - source: registry.example.com/a/b_c/d__e/f-g.h\n"),
    ("pull-secret-creds-store", "", ""),
    ("fips-rsa", KEYS, KEYS + "  fips: true\n"),
]


@pytest.mark.parametrize(("old", "new"), [a[1:] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_what_the_installer_accepts_upi_accepts(runner, tmp_path: Path, old: str, new: str) -> None:
    files = {"pull-secret.json": pull_secret({"quay.io": {"auth": "dTpw"}, "reg.lab": {"credsStore": "x"}})}
    path = _edited(tmp_path, Case("ok", old, new, "", "", "", files=files))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    installer = fake_create_manifests(tmp_path, config_upi_would_write(path), "4.18",
                                      {"FAKE_OPENSHIFT_INSTALL_FIPS_HOST": "1"})
    assert installer.returncode == 0, installer.stderr


def test_a_proxy_password_is_never_shown_even_when_refused(runner, tmp_path: Path) -> None:
    path = _edited(tmp_path, Case("pw", KEYS, proxy("http_proxy: https://admin:Hunter2pw@10.130.1.1:3128",
                                                    "https_proxy: ftp://admin:Hunter2pw@proxy.lab:3128"),
                                  "", "", ""))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Hunter2pw" not in result.output and "admin:" not in result.output
    assert "'https://***@10.130.1.1:3128'" in result.output


def test_the_proxy_credentials_warning_names_the_field_not_the_password(runner, tmp_path: Path) -> None:
    path = _edited(tmp_path, Case("pw", KEYS, proxy("http_proxy: http://admin:Hunter2pw@192.168.122.5:3128"),
                                  "", "", ""))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "cluster.proxy.http_proxy holds a user or password" in " ".join(result.output.split())
    assert "Hunter2pw" not in result.output


SECRET = "c2VjcmV0LXRva2VuLWRvLW5vdC1wcmludA=="


@pytest.mark.parametrize(("content", "fragment"), [
    ('{"auths": {"quay.io": {"auth": "SECRET"}}, "x": NaN}', "line 1 holds NaN, which is not JSON"),
    ('{\n "auths": {\n  "quay.io": {"auth": "SECRETNaN", "n": Infinity}}}', "line 3 holds Infinity"),
    ('{"auths": {"quay.io": {"auth": "SECRET", "n": -Infinity}}}', "holds -Infinity"),
    ('{"auths": {"quay.io": ["SECRET"]}}', "'quay.io' is a JSON array, not an object"),
    ('{"auths": {"quay.io": {"auth": "SECRET"}, "r": 12}}', "'r' is a JSON number"),
    ('{"auths": ["SECRET"]}', 'has no "auths" registry credentials'),
    ('["SECRET"]', 'has no "auths" registry credentials'),
    ('{"auths": {"quay.io": {"auth": "SECRET"}}, "n": 9s}' .replace("9s", "9" * 5000), "a number too long"),
    ("[" * 100_000 + "]" * 100_000, "nesting too deep"),
    ('{"auths": {"quay.io": {"auth": "SECRET", "pad": "PAD"}}}'.replace("PAD", "x" * (1 << 20)),
     "upi reads at most 1048576"),
    ('{"auths": {"quay.io": {"auth": "SECRET"}}', "is not JSON (line 1)"),
], ids=["nan", "infinity-line-3", "minus-infinity", "entry-array", "entry-number", "auths-list",
        "top-level-list", "huge-number", "deep", "huge", "truncated"])
def test_a_bad_pull_secret_exits_2_naming_the_line_never_its_content(
        runner, tmp_path: Path, content: str, fragment: str) -> None:
    content = content.replace("SECRET", SECRET)
    path = _edited(tmp_path, Case("ps", "", "", "", "", "", files={"pull-secret.json": content}))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    out = " ".join(result.output.split())
    assert f"{path}:{_line_of(path, 'pull_secret_file')}: cluster.pull_secret_file: " in out
    assert fragment in out, result.output
    assert SECRET not in result.output and "c2VjcmV0" not in result.output


def test_a_pull_secret_that_is_a_fifo_is_refused_without_hanging(runner, tmp_path: Path) -> None:
    path = _edited(tmp_path, Case("fifo", "", "", "", "", ""))
    (tmp_path / "pull-secret.json").unlink()
    os.mkfifo(tmp_path / "pull-secret.json")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "cluster.pull_secret_file: cannot read pull-secret.json" in result.output
    assert "a FIFO" in result.output


HOSTILE = ["\n", "\r", "\t", " ", "\x00", "\x1b[31m", "\u202e", "\u200b", '"', "\\", "é"]


@pytest.mark.parametrize("bad", HOSTILE, ids=[repr(b) for b in HOSTILE])
@pytest.mark.parametrize(("key", "template"), [
    ("cluster.proxy.http_proxy", "http_proxy: {}"),
    ("cluster.proxy.no_proxy[0]", "no_proxy: [{}]"),
    ("cluster.mirrors[0].source", "source"),
    ("cluster.mirrors[0].mirrors[0]", "mirror"),
])
def test_proxy_and_mirror_strings_refuse_control_and_odd_characters(
        runner, tmp_path: Path, key: str, template: str, bad: str) -> None:
    where = {"http_proxy: {}": "http://proxy.lab{}:3128", "no_proxy: [{}]": ".lab{}.example.com",
             "source": "quay.io/openshift{}/ocp-release", "mirror": "mirror.lab.example.com:8443/o{}cp4"}
    value = json.dumps(where[template].format(bad))  # a YAML double-quoted scalar holding `bad`
    if template == "source":
        case = Case("h", SOURCE, f"    - source: {value}\n", "", "", "")
    elif template == "mirror":
        case = Case("h", MIRROR, f"mirrors: [{value}]\n    - source: quay.io/openshift-release-dev/"
                    "ocp-v4.0-art-dev", "", "", "")
    else:
        lines = ["https_proxy: http://192.168.122.5:3128", template.format(value)]
        case = Case("h", KEYS, proxy(*lines), "", "", "")
    path = _edited(tmp_path, case)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert f": {key}: " in result.output, result.output
    assert "\x1b" not in result.output and "\x00" not in result.output and "\u202e" not in result.output


@pytest.mark.parametrize(("base", "old", "new", "field"), [
    # Before 4.17 OVN's masquerade subnet is 169.254.169.0/29, inside the /17, and the installer
    # does not check: upi refuses the /17 for every release, no place for nodes, pods or services.
    ("dgxpod", "service_network: 172.30.0.0/16", "service_network: 169.254.64.0/18",
     "network.service_network"),
    # `ubuntu:latest` is no canonical name, so the installer reads it as host `ubuntu`, port
    # `latest`, and lets it through; it is a tag, and the cluster could not use it.
    ("compact", SOURCE, "    - source: ubuntu:latest\n", "cluster.mirrors[0].source"),
])
def test_where_upi_is_stricter_than_the_installer(runner, tmp_path: Path, base: str, old: str, new: str,
                                                   field: str) -> None:
    path = _edited(tmp_path, Case("strict", old, new, "", "", "", base=base))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and f": {field}: " in result.output, result.output
    version = yaml.safe_load(path.read_text())["cluster"]["openshift_version"]
    installer = fake_create_manifests(tmp_path, config_upi_would_write(path), version)
    assert installer.returncode == 0, installer.stderr


# --- property: no proxy or mirror string changes the install-config's shape -----------------

PIECES = ["\n", "\r", "\t", " ", "\x00", "\x1b[2J", "\x85", "\u2028", "'", '"', "\\", "#", ",", ";",
          "*", "@", ":", "/", "//", "[", "]", "%", "?", "&", "{", "}", "é", "\u0661", "A", "NaN",
          "a", "b", "0", "9", ".", "-", "_", "://"]
FIELDS = {
    ("proxy", "http_proxy"): ["http://proxy.lab.example.com", "http://", "", "HTTP://10.0.0.5:"],
    ("proxy", "https_proxy"): ["https://proxy.lab.example.com:3129/", "http://u:p@", ""],
    ("proxy", "no_proxy", 0): [".lab.example.com", "10.0.0.", "", "*"],
    ("mirrors", 0, "source"): ["quay.io/openshift-release-dev/", "mirror.lab.example.com:", ""],
    ("mirrors", 1, "mirrors", 0): ["mirror.lab.example.com:8443/ocp4", "localhost:5000/", ""],
}
BASE = yaml.safe_load(inventory_path("compact").read_text())
BASE["cluster"]["proxy"] = {"http_proxy": "http://192.168.122.5:3128", "https_proxy": "http://192.168.122.5:3128",
                            "no_proxy": [".example.com"]}


def _shape(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return type(node).__name__


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prop")
    for name in ("pull-secret.json", "id_rsa.pub", "mirror-ca.pem"):
        (path / name).write_text((inventory_path("compact").parent / name).read_text())
    return path


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(sorted(FIELDS, key=str)), data=st.data())
def test_no_proxy_or_mirror_string_changes_the_install_config_shape(workdir: Path, where: tuple[Any, ...],
                                                                    data: st.DataObject) -> None:
    doc = copy.deepcopy(BASE)
    value = data.draw(st.sampled_from(FIELDS[where])) + data.draw(
        st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join))
    target: Any = doc["cluster"]
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    path = workdir / "inventory.yaml"
    try:
        inv = parse_inventory(yaml.safe_dump(doc, allow_unicode=True), path)
    except InventoryError as exc:
        event("refused")
        assert exc.problems
        return
    event("accepted")
    assert value.isascii() and value.isprintable() and not any(c.isspace() for c in value)
    written = yaml.safe_load(install_config_yaml(inv))
    plain = install_config(Inventory.model_validate(BASE).model_copy(update={"source": path}))
    assert _shape(written) == _shape(plain)
    assert value in json.dumps(written)
