"""A kubeconfig, read as the input it is: every field checked, every file it names bounded.

The shape is client-go's (k8s.io/client-go/tools/clientcmd/api/v1/types.go):
`clusters`, `users` and `contexts` are lists of `{name, cluster|user|context}`
and `current-context` names one context. Anything else -- a list where a
mapping belongs, a context naming a user that is not there, an `auth-provider`
(gcp and azure were removed from client-go in 1.26, kubernetes/kubernetes#112341;
oidc needs its identity provider), a `tokenFile` that is missing or a FIFO --
is a UsageError (exit 2) naming the kubeconfig, the line and the field, for
every command that takes one. Files it names (CA, client certificate and key,
token) are read like the inventory's: regular files only, size-capped, never
a blocking open. Nothing here touches the network.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from upi.errors import UpiError, UsageError
from upi.safefs import read_named_file, shown

MAX_KUBECONFIG = 1 << 20  # an admin kubeconfig is ~10 kB; a large merged one well under 1 MiB
MAX_NAMED = 1 << 20  # a CA bundle, a certificate, a key or a token file
_STR = "tag:yaml.org,2002:str"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"


@dataclass(frozen=True)
class ExecPlugin:
    """`user.exec`: a credential plugin (client.authentication.k8s.io ExecCredential)."""

    api_version: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    field: str


@dataclass(frozen=True)
class Access:
    """What a request needs: the server, whom to trust, and the credentials (file contents read)."""

    where: str  # the kubeconfig (or "the pod's service account"), for messages
    server: str
    insecure: bool
    ca_pem: bytes | None = None  # None: the system's CA store
    cert_pem: bytes | None = None
    key_pem: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None  # re-read on a 401 (a rotated service account token)
    basic: tuple[str, str] | None = field(default=None, repr=False)
    exec_plugin: ExecPlugin | None = None
    ca_field: str = "certificate-authority"  # where the CA and the client certificate came from
    cert_field: str = "client-certificate"


class _Doc:
    """The composed YAML of one kubeconfig: typed lookups that fail naming file, line and field."""

    def __init__(self, path: Path, root: yaml.Node) -> None:
        self.path = path
        self.root = root

    def fail(self, node: yaml.Node | None, where: str, problem: str) -> UsageError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return UsageError(f"{shown(self.path)}{line}: {where}: {problem}" if where
                          else f"{shown(self.path)}{line}: the kubeconfig {problem}")

    def mapping(self, node: yaml.Node, where: str) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, where, f"is {_kind(node)}, not a mapping")
        out: dict[str, yaml.Node] = {}
        for key, value in node.value:
            if not (isinstance(key, yaml.ScalarNode) and key.tag == _STR):
                raise self.fail(key, where, "has a key that is not a string")
            if key.value in out:
                raise self.fail(key, where, f"names {key.value!r} twice")
            out[key.value] = value
        return out

    def items(self, node: yaml.Node | None, where: str) -> list[yaml.Node]:
        if node is None or _is_null(node):
            return []
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, where, f"is {_kind(node)}, not a list")
        return list(node.value)

    def text(self, node: yaml.Node | None, where: str, *, required: bool = False) -> str | None:
        if node is None or _is_null(node):
            if required:
                raise self.fail(node or self.root, where, "is missing")
            return None
        if not (isinstance(node, yaml.ScalarNode) and node.tag == _STR):
            raise self.fail(node, where, f"is {_kind(node)}, not a string")
        if required and not node.value:
            raise self.fail(node, where, "is empty")
        return str(node.value)

    def flag(self, node: yaml.Node | None, where: str) -> bool:
        if node is None or _is_null(node):
            return False
        if not (isinstance(node, yaml.ScalarNode) and node.tag == _BOOL):
            raise self.fail(node, where, f"is {_kind(node)}, not true or false")
        return str(node.value).lower() in ("true", "yes", "on")  # the YAML 1.1 spellings of true


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return {"tag:yaml.org,2002:int": "a number", "tag:yaml.org,2002:float": "a number",
            _BOOL: "true or false", _NULL: "empty", _STR: "a string"}.get(node.tag, f"a {node.tag}")


def _compose(path: Path) -> _Doc:
    try:
        raw = read_named_file(path, MAX_KUBECONFIG)
    except FileNotFoundError:
        raise UsageError(f"{shown(path)}: the kubeconfig does not exist") from None
    except UpiError as exc:  # not a regular file, or too large
        raise UsageError(f"kubeconfig {exc}") from None
    except OSError as exc:
        raise UsageError(f"{shown(path)}: cannot read the kubeconfig: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{shown(path)}: the kubeconfig is not UTF-8 text (byte {exc.start})") from None
    except yaml.MarkedYAMLError as exc:
        line = f":{exc.problem_mark.line + 1}" if exc.problem_mark else ""
        raise UsageError(f"{shown(path)}{line}: the kubeconfig is not YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:  # more than one document, among others
        raise UsageError(f"{shown(path)}: the kubeconfig is not one YAML document: {exc}") from None
    except RecursionError:
        raise UsageError(f"{shown(path)}: the kubeconfig nests too deeply to be one") from None
    if root is None:
        raise UsageError(f"{shown(path)}: the kubeconfig is empty")
    return _Doc(path, root)


def _named(doc: _Doc, top: dict[str, yaml.Node], section: str, inner: str, name: str,
           ref: yaml.Node, ref_field: str) -> tuple[dict[str, yaml.Node], str]:
    """The `inner` mapping of the entry of `section` called `name`, and its field path."""
    for i, entry in enumerate(doc.items(top.get(section), section)):
        fields = doc.mapping(entry, f"{section}[{i}]")
        if doc.text(fields.get("name"), f"{section}[{i}].name", required=True) == name:
            if inner not in fields:
                raise doc.fail(entry, f"{section}[{i}]", f"has no {inner}")
            return doc.mapping(fields[inner], f"{section}[{i}].{inner}"), f"{section}[{i}].{inner}"
    raise doc.fail(ref, ref_field, f"names {name!r}, which is not in {section}")


def _relative(doc: _Doc, value: str) -> Path:
    """A file a kubeconfig names: relative paths are relative to the kubeconfig (as kubectl reads them)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else doc.path.parent / path


def _file_or_data(doc: _Doc, fields: dict[str, yaml.Node], where: str, file_key: str,
                  data_key: str) -> bytes | None:
    """The bytes of `<file_key>` (a file) or `<data_key>` (base64); the data wins, as in client-go."""
    data = doc.text(fields.get(data_key), f"{where}.{data_key}")
    if data:
        try:
            return base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            raise doc.fail(fields[data_key], f"{where}.{data_key}", "is not base64") from None
    name = doc.text(fields.get(file_key), f"{where}.{file_key}")
    return None if not name else read_credential(doc, fields[file_key], f"{where}.{file_key}",
                                                 _relative(doc, name))


def read_credential(doc: _Doc | None, node: yaml.Node | None, where: str, path: Path) -> bytes:
    """A file a kubeconfig names: a regular file of at most MAX_NAMED bytes (a FIFO never blocks)."""
    try:
        return read_named_file(path, MAX_NAMED)
    except FileNotFoundError:
        problem = f"{shown(path)} does not exist"
    except UpiError as exc:
        problem = str(exc)
    except OSError as exc:
        problem = f"cannot read {shown(path)}: {exc.strerror or exc}"
    if doc is None:
        raise UsageError(f"{where}: {problem}")
    raise doc.fail(node, where, problem)


def usable_token(raw: bytes, where: str) -> str:
    """The token in a token file or field: printable ASCII without spaces (it goes into a header)."""
    token = raw.decode("ascii", errors="replace").strip()
    if not token or not token.isprintable() or any(c.isspace() for c in token) or "\ufffd" in token:
        raise UsageError(f"{where}: holds no usable bearer token (empty, or characters a header "
                         "cannot carry)")
    return token


def load_kubeconfig(path: Path) -> Access:
    """The current context's server and credentials; UsageError for anything unusable."""
    doc = _compose(path)
    top = doc.mapping(doc.root, "")
    current = doc.text(top.get("current-context"), "current-context", required=True)
    assert current is not None  # noqa: S101 - required=True
    context, ctx_field = _named(doc, top, "contexts", "context", current,
                                top["current-context"], "current-context")
    cluster_name = doc.text(context.get("cluster"), f"{ctx_field}.cluster", required=True)
    cluster, cl_field = _named(doc, top, "clusters", "cluster", str(cluster_name),
                               context["cluster"], f"{ctx_field}.cluster")
    server = doc.text(cluster.get("server"), f"{cl_field}.server", required=True)
    access = Access(
        where=shown(path), server=str(server),
        insecure=doc.flag(cluster.get("insecure-skip-tls-verify"), f"{cl_field}.insecure-skip-tls-verify"),
        ca_pem=_file_or_data(doc, cluster, cl_field, "certificate-authority", "certificate-authority-data"),
        ca_field=f"{shown(path)}: {cl_field}.certificate-authority")
    user_name = doc.text(context.get("user"), f"{ctx_field}.user")
    if not user_name:
        return access
    user, us_field = _named(doc, top, "users", "user", user_name, context["user"], f"{ctx_field}.user")
    return _with_user(doc, access, user, us_field)


def _with_user(doc: _Doc, access: Access, user: dict[str, yaml.Node], where: str) -> Access:
    if "auth-provider" in user:
        raise doc.fail(user["auth-provider"], f"{where}.auth-provider",
                       "upi does not run auth providers (gcp and azure left kubectl in 1.26; oidc "
                       "needs its identity provider): use a token (`oc login` writes one), a client "
                       "certificate, or an exec plugin such as kubelogin")
    cert = _file_or_data(doc, user, where, "client-certificate", "client-certificate-data")
    key = _file_or_data(doc, user, where, "client-key", "client-key-data")
    if (cert is None) != (key is None):
        missing = "client-key" if key is None else "client-certificate"
        raise doc.fail(user.get("client-key") or user.get("client-certificate"), where,
                       f"has a client certificate or key without its {missing}")
    token_file = None
    token = doc.text(user.get("token"), f"{where}.token")
    if token is not None:
        token = usable_token(token.encode(), f"{shown(doc.path)}: {where}.token")
    name = doc.text(user.get("tokenFile"), f"{where}.tokenFile")
    if name:
        token_file = _relative(doc, name)
        raw = read_credential(doc, user["tokenFile"], f"{where}.tokenFile", token_file)
        token = usable_token(raw, f"{shown(doc.path)}: {where}.tokenFile {shown(token_file)}")
    username = doc.text(user.get("username"), f"{where}.username")
    password = doc.text(user.get("password"), f"{where}.password")
    return Access(access.where, access.server, access.insecure, access.ca_pem, cert, key, token,
                  token_file, (username, password) if username and password else None,
                  _exec(doc, user.get("exec"), f"{where}.exec"), access.ca_field,
                  f"{shown(doc.path)}: {where}.client-certificate")


def _exec(doc: _Doc, node: yaml.Node | None, where: str) -> ExecPlugin | None:
    if node is None or _is_null(node):
        return None
    fields = doc.mapping(node, where)
    api_version = doc.text(fields.get("apiVersion"), f"{where}.apiVersion", required=True)
    command = doc.text(fields.get("command"), f"{where}.command", required=True)
    args = [doc.text(a, f"{where}.args[{i}]", required=True) or ""
            for i, a in enumerate(doc.items(fields.get("args"), f"{where}.args"))]
    env: dict[str, str] = {}
    for i, item in enumerate(doc.items(fields.get("env"), f"{where}.env")):
        pair = doc.mapping(item, f"{where}.env[{i}]")
        env[doc.text(pair.get("name"), f"{where}.env[{i}].name", required=True) or ""] = \
            doc.text(pair.get("value"), f"{where}.env[{i}].value") or ""
    return ExecPlugin(str(api_version), (str(command), *args), env, f"{shown(doc.path)}: {where}")


def in_cluster(account: Path, environ: Mapping[str, str] | None = None) -> Access:
    """The pod's service account: its token (re-read on a 401), its CA, the service's address."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "443")
    where = "the pod's service account"
    token_file = account / "token"
    token = usable_token(read_credential(None, None, where, token_file), f"{where}: {shown(token_file)}")
    ca = read_credential(None, None, where, account / "ca.crt")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return Access(where, server, False, ca, token=token, token_file=token_file,
                  ca_field=f"{where}: {shown(account / 'ca.crt')}")
