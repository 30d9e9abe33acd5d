"""`upi ignition`: install-config -> manifests -> ignition files, staged for `upi push`.

ASSETS is openshift-install's working directory (it consumes what it reads
and keeps its state there). The three .ign files are copied, world-readable,
to RENDER_DIR/http/ignition/, which `upi push` publishes under the HTTP root
(URL: upi.facts.boot.ignition_url). When they were made is recorded beside
them and in ASSETS, so `upi wait` and `upi check http` can apply the one
freshness rule (upi.facts.freshness).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from upi import __version__
from upi.errors import UpiError, UsageError
from upi.facts.boot import ignition_url
from upi.facts.freshness import EXPIRED_AFTER, Freshness, ignition_freshness
from upi.installer import Installer, locate, pull_secret_fragments, version_warnings
from upi.inventory import Inventory, load_inventory
from upi.render import PUBLIC, SECRET, RenderedFile, install_config_yaml
from upi.safefs import read_named_text
from upi.writer import write_tree

if TYPE_CHECKING:
    from upi.push.model import PushResult

IGNITION_FILES = ("bootstrap.ign", "master.ign", "worker.ign")
STAGE_DIR = "http/ignition"  # inside the render dir; writer.OWNED_ELSEWHERE keeps render off it
RECORD = "upi-ignition.json"  # beside the staged files
ASSETS_RECORD = ".upi-ignition.json"  # in ASSETS
PUBLISH_STAGING = ".upi-http"  # in ASSETS: the staging dir when publishing without -o
STATE_FILE = ".openshift_install_state.json"
INSTALLER_LOG = ".openshift_install.log"
SCHEDULER_MANIFEST = "manifests/cluster-scheduler-02-config.yml"
AUTH_FILES = ("auth/kubeconfig", "auth/kubeadmin-password")
PREVIOUS_DIR = ".upi-previous"
# 1 when the kernel runs in FIPS mode, which openshift-install needs for `fips: true`.
FIPS_SWITCH = Path("/proc/sys/crypto/fips_enabled")
# What openshift-install and upi leave in ASSETS: moved aside, never deleted, by --force.
# .upi-wait.json is `upi wait`'s resume record: a new install must not resume the old one.
# `create manifests` also leaves an empty 000_capi-namespace.yaml; any *.ign goes too.
INSTALL_OUTPUTS = (STATE_FILE, INSTALLER_LOG, "install-config.yaml",
                   "install-config.yaml.orig", "manifests", "openshift", "auth", "metadata.json",
                   "000_capi-namespace.yaml", ASSETS_RECORD, ".upi-wait.json", *IGNITION_FILES)
INSTALL_OUTPUT_PATTERNS = ("*.ign", "000_*.yaml")
# Owner-only: on a refused install-config the installer logs the whole pull secret.
PRIVATE_FILES = (INSTALLER_LOG, STATE_FILE, *AUTH_FILES)

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class StagedFile:
    """One ignition file as staged for the HTTP server."""

    name: str
    path: Path
    sha256: str
    size: int
    url: str | None  # None: no node of this role fetches it (worker.ign in a compact cluster)


@dataclass(frozen=True)
class IgnitionResult:
    """What `upi ignition` made, where, and when."""

    assets: Path
    stage_dir: Path
    made_at: datetime
    installer_version: str
    masters_schedulable: bool
    files: list[StagedFile]
    moved_aside: Path | None = None
    published: PushResult | None = None  # without a render dir: what went to the HTTP root

    @property
    def expires_at(self) -> datetime:
        """When the certificates inside the files stop working."""
        return self.made_at + EXPIRED_AFTER


def make_ignition(
    inventory: Path,
    assets: Path,
    render_dir: Path | None,
    *,
    force: bool = False,
    installer: Path | None = None,
    on_line: Callable[[str], None] = lambda _line: None,
    on_warning: Callable[[str], None] = lambda _message: None,
    on_note: Callable[[str], None] = lambda _message: None,
    clock: Clock = _utcnow,
) -> IgnitionResult:
    """Run the installer's two steps in `assets` and stage the ignition files in `render_dir`.

    Without a `render_dir` the files are staged in ASSETS/.upi-http and
    published at once to the provisioner's HTTP root, the way `upi push` does
    it (0644, SELinux label). `on_line` gets each installer output line (pull
    secret redacted), `on_warning` each warning as soon as it is known,
    `on_note` what an installer warning means for this inventory, right after it.
    """
    inv = load_inventory(inventory)
    binary = locate(installer, version=inv.cluster.openshift_version)
    publish = render_dir is None
    render_dir = assets / PUBLISH_STAGING if render_dir is None else render_dir
    _check_dirs(assets, render_dir)
    _refuse_installed(inventory, assets, force=force, on_warning=on_warning)
    for warning in _make_assets(assets):
        on_warning(warning)
    moved = _clear_old_install(assets, force=force, clock=clock)
    secret = read_named_text(inv.resolve(inv.cluster.pull_secret_file))  # never hangs on a FIFO
    run = Installer(binary, assets, pull_secret_fragments(secret))
    version = run.version()
    for warning in [*version_warnings(inv, version), *_fips_warnings(inv)]:
        on_warning(warning)
    try:
        write_install_config(inv, assets)
        _keep_private(assets)  # before the installer first appends to its log
        # Certificates are minted from here on: record the earliest time, so age is never understated.
        made_at = clock()
        def manifests_line(line: str) -> None:
            on_line(line)
            if SCHEDULABLE_WARNING in line:
                on_note(schedulable_note(inv))

        run.run("create", "manifests", on_line=manifests_line)
        set_masters_schedulable(assets / SCHEDULER_MANIFEST, inv.masters_schedulable)
        run.run("create", "ignition-configs", on_line=on_line)
    finally:
        _keep_private(assets)  # also after a failed or interrupted step
    files = _read_ignition(assets)
    stage_dir = render_dir / STAGE_DIR
    record = _record(inv, files, made_at, version)
    write_tree(stage_dir, [*files, RenderedFile(RECORD, record, PUBLIC)], force=True)
    write_tree(assets, [RenderedFile(ASSETS_RECORD, record, PUBLIC)], force=True)
    urls = _urls(inv)
    staged = [StagedFile(f.path, stage_dir / f.path, f.sha256, len(f.content), urls.get(f.path))
              for f in files]
    published = _publish(inv, files, record) if publish else None
    return IgnitionResult(assets, stage_dir, made_at, version, inv.masters_schedulable, staged, moved,
                          published)


def _publish(inv: Inventory, files: list[RenderedFile], record: bytes) -> PushResult:
    """The ignition files (and their record) to provisioner.http_root/ignition/, as push does."""
    from upi.push import push_files

    http = [RenderedFile(f"{STAGE_DIR}/{f.path}", f.content, PUBLIC) for f in files]
    http.append(RenderedFile(f"{STAGE_DIR}/{RECORD}", record, PUBLIC))
    return push_files(inv, http, target="provisioner")


def _refuse_installed(inventory: Path, assets: Path, *, force: bool,
                      on_warning: Callable[[str], None]) -> None:
    """An installed cluster's ASSETS: new ignition would be a new cluster; day 2 is `upi nodes add`."""
    from upi.wait.state import install_completed

    if not install_completed(assets):
        return
    how = (f"to add workers use `upi nodes add {inventory} NODE... -o DIR --dir {assets}`: it boots "
           "them with the worker ignition the cluster serves now (docs/day2.md)")
    if not force:
        raise UsageError(f"{assets}: its cluster is installed (Install complete!): `upi ignition` "
                         f"would make a new cluster identity and move the installed one's state aside; {how}")
    on_warning(f"{assets}: its cluster is installed; --force starts a NEW cluster (its state moves "
               f"aside); {how}")


def _check_dirs(assets: Path, render_dir: Path) -> None:
    if assets.exists() and not assets.is_dir():
        raise UsageError(f"--dir {assets} exists and is not a directory")
    if assets.resolve() == render_dir.resolve():
        raise UsageError(f"--dir and -o are both {assets}: openshift-install consumes and rewrites "
                         "its directory, so give it one of its own (e.g. assets/<cluster>)")


def _make_assets(assets: Path) -> list[str]:
    """ASSETS, created owner-only; a warning when an existing one is open to others."""
    if not assets.exists():
        assets.mkdir(parents=True, mode=0o700)
        assets.chmod(0o700)  # mkdir's mode is masked by the umask
        return []
    mode = assets.stat().st_mode & 0o777
    if mode & 0o077:
        return [f"{assets} is mode {mode:04o}: the installer's manifests, log and auth/ hold the "
                "pull secret and cluster-admin credentials; `chmod 700` it"]
    return []


def _keep_private(assets: Path) -> None:
    """The installer's log and state, and the admin credentials: 0600.

    An absent log is created 0600, so the installer (which appends to it and
    would create it 0644) never writes a secret into a readable file.
    """
    for name in PRIVATE_FILES:
        path = assets / name
        if name == INSTALLER_LOG and not path.exists():
            path.touch(mode=SECRET)
        if path.is_file() and not path.is_symlink():
            path.chmod(SECRET)


def _clear_old_install(assets: Path, *, force: bool, clock: Clock) -> Path | None:
    """Refuse an ASSETS dir with an older install's state; with `force`, move it aside.

    With `force` a failed run's leftovers go too, state file or not: a run refused at
    `create manifests` leaves only the installer's log, which holds the whole pull secret.
    """
    names = {*INSTALL_OUTPUTS, *(p.name for pattern in INSTALL_OUTPUT_PATTERNS
                                 for p in assets.glob(pattern))}
    present = sorted(n for n in names if (assets / n).exists() or (assets / n).is_symlink())
    if not (assets / STATE_FILE).exists() and not (force and present):
        return None
    if not force:
        raise UsageError(
            f"{assets} holds an older install's state ({STATE_FILE}): openshift-install would "
            "reuse its assets and certificates. Use an empty directory, or pass --force to move "
            f"the old files into {assets / PREVIOUS_DIR}/")
    dest = assets / PREVIOUS_DIR / clock().strftime("%Y%m%dT%H%M%SZ")
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    (assets / PREVIOUS_DIR).chmod(0o700)  # the old install's secrets move in here
    for name in present:
        (assets / name).replace(dest / name)
    return dest


def _fips_warnings(inv: Inventory) -> list[str]:
    """`fips: true` on a host not in FIPS mode: the installer will refuse; say why first."""
    if not inv.cluster.fips:
        return []
    try:
        enabled = FIPS_SWITCH.read_text().strip() == "1"
    except OSError:
        enabled = False
    if enabled:
        return []
    return [f"cluster.fips is true but this host is not in FIPS mode ({FIPS_SWITCH} is not 1): "
            "openshift-install refuses it here; run the FIPS-capable installer binary for RHEL 9 on "
            "a host booted with FIPS enabled"]


def write_install_config(inv: Inventory, assets: Path) -> None:
    """install-config.yaml and its .orig copy in ASSETS (0600), exactly as `upi render` writes them."""
    text = install_config_yaml(inv).encode()
    write_tree(assets, [RenderedFile("install-config.yaml", text, SECRET),
                        RenderedFile("install-config.yaml.orig", text, SECRET)], force=True)


# What `create manifests` warns whenever compute replicas are 0 (openshift/installer
# pkg/asset/manifests/scheduler.go), which every UPI install-config has.
SCHEDULABLE_WARNING = "Making control-plane schedulable by setting MastersSchedulable to true"


def schedulable_note(inv: Inventory) -> str:
    """One line on the installer's mastersSchedulable warning: expected, and what upi does about it."""
    why = ("expected with UPI: install-config lists 0 compute replicas because the workers join "
           "later by PXE")
    if inv.compact:
        return (f"{why}; this is a compact cluster (no workers), so the masters must run workloads "
                "and the ingress routers: upi keeps mastersSchedulable true")
    if inv.masters_schedulable:
        return (f"{why}; this inventory has one worker, which cannot hold both router replicas, so "
                "the masters share workloads and the 80/443 pools: upi keeps mastersSchedulable true")
    return (f"{why}; this inventory has {len(inv.workers)} workers, so upi sets mastersSchedulable "
            "back to false: workloads and the routers run on the workers, the masters only run "
            "the control plane")


def set_masters_schedulable(path: Path, schedulable: bool) -> None:
    """Set spec.mastersSchedulable in the Scheduler manifest, keeping everything else."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UpiError(f"cannot read {path} that openshift-install should have written: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "Scheduler":
        raise UpiError(f"{path} is not a Scheduler manifest")
    spec = doc.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise UpiError(f"{path}: spec is not a mapping")
    spec["mastersSchedulable"] = schedulable
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False).encode()
    mode = path.stat().st_mode & 0o777
    write_tree(path.parent, [RenderedFile(path.name, text, mode)], force=True)


def _read_ignition(assets: Path) -> list[RenderedFile]:
    files = []
    for name in IGNITION_FILES:
        path = assets / name
        try:
            data = path.read_bytes()
            version = json.loads(data)["ignition"]["version"]
        except (OSError, ValueError, KeyError, TypeError):
            raise UpiError(f"openshift-install did not leave a valid Ignition config at {path}") from None
        if not isinstance(version, str):
            raise UpiError(f"{path}: ignition.version is not a string")
        files.append(RenderedFile(name, data, PUBLIC))
    return files


def _urls(inv: Inventory) -> dict[str, str]:
    return {f"{node.role.value}.ign": ignition_url(inv, node) for node in inv.nodes}


def _record(inv: Inventory, files: list[RenderedFile], made_at: datetime, version: str) -> bytes:
    doc = {
        "upi": __version__,
        "cluster": inv.cluster.domain,
        "openshift_install": version,
        "made_at": made_at.isoformat(timespec="seconds"),
        "expires_at": (made_at + EXPIRED_AFTER).isoformat(timespec="seconds"),
        "files": {f.path: {"sha256": f.sha256, "size": len(f.content)} for f in files},
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def _record_path(path: Path) -> Path | None:
    if path.is_file():
        return path if path.suffix == ".json" else None
    for candidate in (path / ASSETS_RECORD, path / RECORD, path / STAGE_DIR / RECORD):
        if candidate.is_file():
            return candidate
    return None


def made_at(path: Path) -> datetime:
    """When the ignition files at `path` were made.

    `path` is an ASSETS dir, a render dir, its http/ignition/ dir, or a
    record file. Without a record (files made by hand), bootstrap.ign's
    modification time stands in.
    """
    record = _record_path(path)
    if record is not None:
        try:
            doc: dict[str, Any] = json.loads(record.read_text())
            when = datetime.fromisoformat(doc["made_at"])
        except (OSError, ValueError, KeyError, TypeError):
            raise UpiError(f"{record} is not a upi ignition record; run `upi ignition` again") from None
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    ign = path if path.suffix == ".ign" else path / "bootstrap.ign"
    if not ign.is_file() and (path / STAGE_DIR / "bootstrap.ign").is_file():
        ign = path / STAGE_DIR / "bootstrap.ign"
    if not ign.is_file():
        raise UpiError(f"no ignition files at {path}: run `upi ignition INVENTORY --dir ASSETS -o DIR`")
    return datetime.fromtimestamp(ign.stat().st_mtime, UTC)


def ignition_status(path: Path, now: datetime | None = None) -> Freshness:
    """How usable the ignition files at `path` are now: ok, warn (> 12 h) or expired (> 24 h)."""
    return ignition_freshness(made_at(path), now or _utcnow())
