"""Container image references and where a mirror serves them.

The grammar is distribution/reference's (github.com/distribution/reference,
reference.go and normalize.go): a first component with a dot or a port, or
`localhost`, is the registry; otherwise the image is on docker.io (one path
component gets `library/`). A tag follows the last `:` of the last component,
a digest follows `@`. `mirrored` applies an imageDigestSources mapping as
containers-registries.conf(5) does: the longest matching source wins, matched
on a whole path component.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-f]{32,}")
DOCKER_HUB = "docker.io"


@dataclass(frozen=True)
class ImageRef:
    """registry/repository[:tag][@digest]."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """registry/repository, without tag or digest."""
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What the manifest is asked by: the digest, else the tag (`latest` when neither)."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"

    def moved(self, name: str) -> ImageRef:
        """The same tag and digest under another registry/repository."""
        registry, _, repository = name.partition("/")
        return ImageRef(registry, repository, self.tag, self.digest)


def parse_image(text: str) -> ImageRef:
    """An ImageRef; ValueError naming what is wrong."""
    if not text or not text.isascii() or any(c.isspace() for c in text):
        raise ValueError("empty, or holds a space or a character that is not ASCII")
    rest, digest = text, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"@{digest[:20]} is not a digest (sha256:<64 hex digits>)")
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        tag = last.split(":", 1)[1]
        rest = rest[: len(rest) - len(tag) - 1]
        if not _TAG.fullmatch(tag):
            raise ValueError(f":{tag[:20]} is not a tag")
    first, _, path = rest.partition("/")
    if path and ("." in first or ":" in first or first == "localhost"):
        if not _HOST.fullmatch(first):
            raise ValueError(f"{first[:40]} is not a registry host[:port]")
        registry = first
    else:
        registry, path = DOCKER_HUB, rest
        if "/" not in path:
            path = f"library/{path}"
    if not path or not all(_COMPONENT.fullmatch(c) for c in path.split("/")):
        raise ValueError("the repository is not lower case letters, digits and . _ - between slashes")
    return ImageRef(registry, path, tag, digest)


@dataclass(frozen=True)
class Mapping:
    """One imageDigestSources entry: `source` is served by `mirrors`, in order."""

    source: str
    mirrors: Sequence[str]


def _matches(name: str, source: str) -> bool:
    return name == source or name.startswith(f"{source}/")


def mirrored(ref: ImageRef, mapping: Iterable[Mapping]) -> list[ImageRef]:
    """Where the cluster looks for `ref` through the mapping: [] when no source matches it."""
    candidates = [m for m in mapping if _matches(ref.name, m.source)]
    if not candidates:
        return []
    longest = max(len(m.source) for m in candidates)
    out: list[ImageRef] = []
    for m in candidates:
        if len(m.source) != longest:
            continue
        for target in m.mirrors:
            moved = ref.moved(target + ref.name[len(m.source):])
            if moved not in out:
                out.append(moved)
    return out
