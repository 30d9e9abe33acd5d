"""Just enough of Kubernetes' protobuf encoding for the fake API server.

kubectl sends `certificate approve` as application/vnd.kubernetes.protobuf
(a `k8s\\0` magic, then runtime.Unknown wrapping the object). The fake reads
the fields an approval touches (k8s.io/api certificates/v1 generated.proto):
metadata.name (1.1) and .resourceVersion (1.6), status.conditions (3.1) with
type 1, reason 2, message 3, status 6.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MAGIC = b"k8s\x00"


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message; length-delimited values as bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
            yield num, val
        elif wire == 2:
            n, i = _varint(buf, i)
            yield num, buf[i:i + n]
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _strings(buf: bytes, names: dict[int, str]) -> dict[str, str]:
    return {names[n]: v.decode() for n, v in fields(buf) if n in names and isinstance(v, bytes)}


def decode_csr_approval(body: bytes) -> dict[str, Any]:
    """The JSON-shaped parts of a protobuf CertificateSigningRequest that an approval needs."""
    if not body.startswith(MAGIC):
        raise ValueError("not a Kubernetes protobuf body")
    raw = next((v for n, v in fields(body[len(MAGIC):]) if n == 2 and isinstance(v, bytes)), b"")
    doc: dict[str, Any] = {"metadata": {}, "status": {"conditions": []}}
    for num, val in fields(raw):
        if not isinstance(val, bytes):
            continue
        if num == 1:
            doc["metadata"] = _strings(val, {1: "name", 6: "resourceVersion"})
        elif num == 3:
            doc["status"]["conditions"] = [
                _strings(c, {1: "type", 2: "reason", 3: "message", 6: "status"})
                for n, c in fields(val) if n == 1 and isinstance(c, bytes)]
    return doc
