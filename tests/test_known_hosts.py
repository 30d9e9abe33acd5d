"""known_hosts as admins really have it, through `upi push` to a real sshd on loopback.

Markers (`@cert-authority`, `@revoked`), hashed names written by the real
`ssh-keygen -H`, and lines no parser expects: the host key is still checked
(never accepted on first use), a revoked key is refused even where another
line lists it, and nothing ends in a traceback.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import require
from pushkit import Site, Sshd, fingerprint_of, keygen, make_site

from upi.cli import app


@pytest.fixture(scope="module")
def sshd(sshd):
    """conftest's sshd, for pushes: they also run the real config checkers on the host."""
    require("haproxy")
    return sshd


def _site(tmp_path: Path, example_dir: Path, runner, sshd: Sshd, known: bytes | str) -> Site:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_bytes(known.encode() if isinstance(known, str) else known)
    ssh = {"host": "127.0.0.1", "port": sshd.port, "user": "root",
           "known_hosts": str(known_hosts), "identity_file": str(sshd.client_key)}
    return make_site(tmp_path, example_dir, runner, ssh)


def _push(runner, site: Site):
    result = runner.invoke(app, ["push", str(site.inventory), "-o", str(site.out), "--only",
                                 "load_balancer"])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _name(sshd: Sshd) -> str:
    return f"[127.0.0.1]:{sshd.port}"


def _pushed(site: Site) -> bool:
    return (site.root / "etc/haproxy/haproxy.cfg").exists()


JUNK = [
    "garbage",
    "host-only ssh-ed25519",
    "h ssh-ed25519 !!!not-base64!!!",
    "h ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI",  # cut short
    "h ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ",
    "h sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAI",
    "h ssh-dss AAAA",
    "@unknown-marker h ssh-ed25519 AAAA",
    "@revoked",
    "@cert-authority *.lab",
    "|1|abc|def ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJb/32nVr4k8Msgd212ptgU/YWT00NFFdF73y6Xd14tf",
    "|1|||| ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJb/32nVr4k8Msgd212ptgU/YWT00NFFdF73y6Xd14tf",
    "\t  # an indented comment",
    "h\tssh-ed25519\tAAAA\ttabs",
]


@pytest.mark.parametrize("junk", JUNK)
def test_a_malformed_line_is_skipped_and_the_real_key_still_works(runner, tmp_path, example_dir,
                                                                  sshd, junk) -> None:
    site = _site(tmp_path, example_dir, runner, sshd, f"{junk}\n{_name(sshd)} {sshd.host_pub}\n")
    result = _push(runner, site)
    assert result.exit_code == 0, result.output
    assert _pushed(site)


def test_only_junk_means_unknown_and_names_the_lines_it_skipped(runner, tmp_path, example_dir,
                                                                 sshd) -> None:
    junk = "\n".join(JUNK).encode() + b"\n\xff\xfe\x00binary ssh-ed25519 AAAA\n"
    site = _site(tmp_path, example_dir, runner, sshd, junk)
    result = _push(runner, site)
    assert result.exit_code == 1
    assert f"{_name(sshd)} is not in" in result.output
    assert fingerprint_of(sshd.host_key.with_suffix(".pub")) in result.output
    assert "has lines upi cannot use: line 1: not `host key-type key`" in result.output
    assert not _pushed(site)


def test_cert_authority_is_not_trusted_and_says_why(runner, tmp_path, example_dir, sshd) -> None:
    ca = keygen(tmp_path / "ca")
    site = _site(tmp_path, example_dir, runner, sshd, f"@cert-authority * {ca}\n"
                 f"@cert-authority {_name(sshd)} {sshd.host_pub}\n")
    result = _push(runner, site)
    assert result.exit_code == 1
    assert f"{_name(sshd)} is not in" in result.output
    assert "line 2: @cert-authority (upi does not check host certificates" in result.output
    assert not _pushed(site)


def test_cert_authority_beside_the_hosts_own_key_is_fine(runner, tmp_path, example_dir, sshd) -> None:
    ca = keygen(tmp_path / "ca")
    site = _site(tmp_path, example_dir, runner, sshd,
                 f"@cert-authority * {ca}\n{_name(sshd)} {sshd.host_pub}\n")
    assert _push(runner, site).exit_code == 0
    assert _pushed(site)


@pytest.mark.parametrize("revoked_for", ["{name}", "*", "other.example.com", "|1|x|y"])
@pytest.mark.parametrize("order", ["revoked first", "revoked last"])
def test_a_revoked_key_is_refused_even_where_another_line_lists_it(
        runner, tmp_path, example_dir, sshd, revoked_for, order) -> None:
    revoked = f"@revoked {revoked_for.format(name=_name(sshd))} {sshd.host_pub}"
    listed = f"{_name(sshd)} {sshd.host_pub}"
    lines = [revoked, listed] if order == "revoked first" else [listed, revoked]
    site = _site(tmp_path, example_dir, runner, sshd, "\n".join(lines) + "\n")
    result = _push(runner, site)
    assert result.exit_code == 1
    line = 1 if order == "revoked first" else 2
    assert f"line {line} marks @revoked: refused to connect" in result.output
    assert fingerprint_of(sshd.host_key.with_suffix(".pub")) in result.output
    assert not _pushed(site)


def test_a_revoked_key_where_known_hosts_expects_another_is_called_revoked(
        runner, tmp_path, example_dir, sshd) -> None:
    other = keygen(tmp_path / "other")
    site = _site(tmp_path, example_dir, runner, sshd,
                 f"{_name(sshd)} {other}\n@revoked * {sshd.host_pub}\n")
    result = _push(runner, site)
    assert result.exit_code == 1
    assert "marks @revoked" in result.output and "CHANGED" not in result.output
    assert not _pushed(site)


def test_hashed_names_from_ssh_keygen_match(runner, tmp_path, example_dir, sshd) -> None:
    site = _site(tmp_path, example_dir, runner, sshd, f"{_name(sshd)} {sshd.host_pub}\n")
    known = tmp_path / "known_hosts"
    subprocess.run([require("ssh-keygen"), "-H", "-f", str(known)], check=True, timeout=30,
                   capture_output=True)
    assert known.read_text().startswith("|1|") and "127.0.0.1" not in known.read_text()
    assert _push(runner, site).exit_code == 0
    assert _pushed(site)


def test_a_hashed_name_with_another_key_is_a_changed_key(runner, tmp_path, example_dir, sshd) -> None:
    other = keygen(tmp_path / "other")
    site = _site(tmp_path, example_dir, runner, sshd, f"{_name(sshd)} {other}\n")
    known = tmp_path / "known_hosts"
    subprocess.run([require("ssh-keygen"), "-H", "-f", str(known)], check=True, timeout=30,
                   capture_output=True)
    result = _push(runner, site)
    assert result.exit_code == 1
    assert "CHANGED" in result.output
    assert not _pushed(site)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_known_hosts_that_is_no_file_is_bad_input(runner, tmp_path, example_dir, sshd, kind) -> None:
    site = _site(tmp_path, example_dir, runner, sshd, "")
    known = tmp_path / "known_hosts"
    known.unlink()
    if kind == "fifo":
        os.mkfifo(known)  # read blocking, this would wait for a writer forever
    else:
        known.mkdir()
    result = _push(runner, site)
    assert result.exit_code == 2, result.output
    assert f"known_hosts {known}" in result.output
    assert not _pushed(site)
