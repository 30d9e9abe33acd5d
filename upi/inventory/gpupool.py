"""The inventory's `gpu_pool:` section: the DGX nodes as a pool of their own (docs/gpu.md).

Facts: ../shared/data/tuning/README.md. A custom MachineConfigPool selects its
nodes by `node-role.kubernetes.io/<pool>` and its MachineConfigs by the roles
`worker` and `<pool>`; a KubeletConfig (or a PerformanceProfile) targets it by
the pool's label. Kept apart from gpu.py so the pool grows on its own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, field_validator

from upi.inventory.crdfields import carried, expand, misfit_message

if TYPE_CHECKING:
    from upi.inventory.model import Inventory

# A pool's name becomes a label key's last segment and part of MachineConfig names: a DNS label.
_POOL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# A label/taint key: optional DNS-subdomain prefix, then a name segment (apimachinery IsQualifiedName).
_KEY = re.compile(r"^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")
# A kubelet cpuset: "0-3", "0,1,56-57" (kubelet's cpuset.Parse). ASCII digits only: Python's \d
# also takes other scripts' digits ('٠-١'), which int() reads and the kubelet refuses.
_CPUSET = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
# CPU ids run below the RHEL 9 kernel's NR_CPUS (CONFIG_NR_CPUS=8192 on x86_64): a larger id
# names no CPU of any node, and a kubelet whose reservedSystemCPUs names a missing CPU does not
# start, taking every node of the pool NotReady at the rollout.
MAX_CPU = 8191
# Sizes the kernel offers on x86_64 (hugepagesz=); the PerformanceProfile spells them the same.
HUGEPAGE_SIZES = ("2M", "1G")
_PAGE_MIB = {"2M": 2, "1G": 1024}
# Pages reserved at boot come out of the node's memory: more than the largest DGX holds (4 TB,
# DGX B200; the H100/H200 hold 2 TB) leaves a node that cannot boot on any DGX.
MAX_HUGEPAGES_MIB = 4 << 20


def _pool(value: str) -> str:
    if value in ("worker", "master") or not _POOL.fullmatch(value):
        raise ValueError(f"{value!r} is not a pool name (a DNS label other than worker and master)")
    return value


def _key(value: str) -> str:
    if not _KEY.fullmatch(value):
        raise ValueError(f"{value!r} is not a taint key (prefix/name, e.g. nvidia.com/gpu)")
    return value


def _value(value: str) -> str:
    if not _VALUE.fullmatch(value) or len(value) > 63:
        raise ValueError(f"{value!r} is not a taint value (up to 63 letters, digits, '-', '_', '.')")
    return value


def _cpuset(value: str) -> str:
    cpus(value)
    return value


def _cpu_id(digits: str) -> int:
    """A CPU id; past MAX_CPU for any longer number (never int() of a thousand digits)."""
    return int(digits) if len(digits) <= 5 else MAX_CPU + 1


def cpus(value: str) -> frozenset[int]:
    """The CPU ids of a CPU list; ValueError naming what is wrong with it."""
    if not _CPUSET.fullmatch(value):
        raise ValueError(f"{value[:60]!r} is not a CPU list (e.g. 0-1 or 0,1,56-57)")
    out: set[int] = set()
    for part in value.split(","):
        low, _, high = part.partition("-")
        first, last = _cpu_id(low), _cpu_id(high or low)
        if last < first:
            raise ValueError(f"{value[:60]!r}: the range {part} runs backwards")
        if last > MAX_CPU:
            raise ValueError(f"{value[:60]!r}: CPU {(high or low)[:20]} is past the last CPU id Linux "
                             f"numbers ({MAX_CPU}, the RHEL kernel's NR_CPUS less one)")
        out.update(range(first, last + 1))
    return frozenset(out)


def _unavailable(value: int | str) -> int | str:
    """How many nodes reboot at once: a count (1 or more) or a percentage of the pool ("25%")."""
    if isinstance(value, bool) or (isinstance(value, int) and value < 1):
        raise ValueError(f"{value!r} is not a node count (1 or more) or a percentage (25%)")
    if isinstance(value, str) and not re.fullmatch(r"([1-9][0-9]?|100)%", value):
        raise ValueError(f"{value!r} is not a percentage of the pool (1% to 100%)")
    return value


def _profile(value: dict[str, Any]) -> dict[str, Any]:
    # Dotted keys (`numa.topologyPolicy: single-numa-node`) nest, as in the other operator objects.
    value = expand(value, profile_facts()["specFields"], "PerformanceProfile")
    cpu = value.get("cpu")
    if not isinstance(cpu, dict) or not cpu.get("reserved") or not cpu.get("isolated"):
        raise ValueError("a PerformanceProfile spec needs cpu.reserved and cpu.isolated (CPU lists)")
    found: dict[str, frozenset[int]] = {}
    for key in ("reserved", "isolated"):
        if not isinstance(cpu[key], str):
            raise ValueError(f"cpu.{key} must be a CPU list written as text (\"0-1\"), not {cpu[key]!r}")
        try:
            found[key] = cpus(cpu[key])
        except ValueError as err:
            raise ValueError(f"cpu.{key}: {err}") from None
    bad = misfit_message("PerformanceProfile", profile_facts(), value)
    if bad is not None:
        # The CRD is structural: the API server would drop the field, or refuse the object, at upi gpu.
        raise ValueError(bad)
    both = found["reserved"] & found["isolated"]
    if both:
        # The Node Tuning Operator refuses a profile whose reserved and isolated sets overlap.
        raise ValueError(f"CPU {min(both)} is in both cpu.reserved and cpu.isolated "
                         "(each CPU is one or the other)")
    return value


def profile_facts() -> dict[str, Any]:
    """The PerformanceProfile spec's fields (performance-profile.json, rebuilt by tests/carried_facts.py).

    From openshift/cluster-node-tuning-operator's CRD (Apache-2.0): validate checks
    a `performance_profile` against them (crdfields.py), as nic_cluster_policy is checked.
    """
    return carried("performance-profile.json")


def _none(value: Any) -> Any:
    """`taint: none` (the word, as the admin writes it) means no taint; nothing else does.

    An empty `taint:` (YAML null), `false` or `None` might mean either no taint or
    the default one: refused, naming the two spellings that say which.
    """
    if value == "none":
        return None
    if value is None or isinstance(value, bool | str):
        shown = "empty" if value is None else repr(value) if isinstance(value, str) else str(value).lower()
        raise ValueError(f"{shown} is not a taint: write none (lowercase) for no taint, a mapping "
                         "{key, value, effect} for another taint, or leave the key out for "
                         "nvidia.com/gpu:NoSchedule")
    return value


PoolName = Annotated[str, AfterValidator(_pool)]
CpuSet = Annotated[str, AfterValidator(_cpuset)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Taint(_Model):
    """The taint that keeps everything but GPU work off the pool's nodes."""

    key: Annotated[str, AfterValidator(_key)] = "nvidia.com/gpu"
    value: Annotated[str, AfterValidator(_value)] = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Hugepages(_Model):
    """Hugepages reserved at boot on every node of the pool."""

    size: Literal["2M", "1G"]
    count: StrictInt = Field(ge=1, le=1_000_000)


class Tuning(_Model):
    """Kubelet tuning of the pool: a KubeletConfig, or a PerformanceProfile in full."""

    cpu_manager: Literal["static", "none"] = "static"
    reserved_cpus: CpuSet = "0-1"
    topology_manager: Literal["none", "best-effort", "restricted", "single-numa-node"] = "restricted"
    hugepages: list[Hugepages] = Field(default_factory=list, max_length=len(HUGEPAGE_SIZES))  # one per size
    performance_profile: Annotated[dict[str, Any], AfterValidator(_profile)] | None = None

    @field_validator("hugepages")
    @classmethod
    def _one_count_per_size(cls, value: list[Hugepages]) -> list[Hugepages]:
        sizes = [h.size for h in value]
        twice = next((s for s in sizes if sizes.count(s) > 1), None)
        if twice:
            raise ValueError(f"the size {twice} is given twice (one count per size)")
        total = sum(h.count * _PAGE_MIB[h.size] for h in value)
        if total > MAX_HUGEPAGES_MIB:
            raise ValueError(f"{total >> 10} GiB of hugepages is more than the memory of the largest DGX "
                             f"({MAX_HUGEPAGES_MIB >> 20} TiB): the pages are taken at boot, before "
                             "anything runs")
        return value


class GpuPool(_Model):
    """The GPU nodes as their own MachineConfigPool: taint, tuning, diagnosis, metrics."""

    name: PoolName = "dgx"
    taint: Annotated[Taint | None, BeforeValidator(_none)] = Taint()
    tuning: Tuning = Tuning()
    max_unavailable: Annotated[int | str, AfterValidator(_unavailable)] = 1
    diagnosis_level: StrictInt = Field(default=1, ge=0, le=4)
    metrics: bool = True


DEFAULT = GpuPool()


def pool_settings(inv: Inventory) -> GpuPool:
    """The inventory's `gpu_pool:` section, or every default."""
    return inv.gpu_pool or DEFAULT


def pool_taint(inv: Inventory) -> Taint | None:
    """The taint the GPU nodes carry, None with `taint: none`."""
    return pool_settings(inv).taint
