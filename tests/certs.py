"""Real keys, certificates and CSRs made with cryptography, for the CSR tests."""

from __future__ import annotations

import datetime as dt
import ipaddress
import sys
from dataclasses import dataclass
from functools import lru_cache
from http.server import ThreadingHTTPServer
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class Issued:
    """A key and its certificate, in PEM."""

    key: PrivateKey
    cert: x509.Certificate
    cert_pem: bytes
    key_pem: bytes


def _pem_key(key: PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str) -> Issued:
    """A self-signed CA (ECDSA P-256)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return Issued(key, cert, cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def issue(ca: Issued, cn: str, *, server: bool = False, org: str | None = None,
          dns: tuple[str, ...] = ()) -> Issued:
    """A leaf certificate: a server one for 127.0.0.1/localhost (and `dns`), or a client one."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(ca.cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), *map(x509.DNSName, dns),
             x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return Issued(key, cert, cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


@lru_cache(maxsize=2)
def node_key(kind: str = "ec") -> PrivateKey:
    """One key per type, reused: kubelet uses ECDSA P-256; RSA for the older form."""
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def make_csr(cn: str, *, org: str | None = "system:nodes", dns: tuple[str, ...] = (),
             ips: tuple[str, ...] = (), emails: tuple[str, ...] = (), uris: tuple[str, ...] = (),
             key: str = "ec", extra: tuple[x509.NameAttribute, ...] = ()) -> bytes:
    """A real PEM certificate request, shaped like a kubelet's unless told otherwise."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    subject = x509.Name([*attrs, *extra, x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    sans += [x509.RFC822Name(e) for e in emails] + [x509.UniformResourceIdentifier(u) for u in uris]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(node_key(key), hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


class TlsHttpServer(ThreadingHTTPServer):
    """A threading HTTP server for a TLS listening socket whose handshakes run per connection.

    Wrap its socket with `do_handshake_on_connect=False`: the handshake then
    happens at the connection's first read, in its own thread, so a client
    that connects and never speaks cannot stall accept() nor shutdown(). A
    handshake the client fails on purpose (a test of an unknown CA) or a
    client gone is the client's to report: not printed here as a traceback.
    """

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # ssl.SSLError, reset, broken pipe
            return
        super().handle_error(request, client_address)
