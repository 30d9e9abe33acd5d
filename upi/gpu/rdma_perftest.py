"""The GPUDirect RDMA bandwidth test of one pair: its two pods, the server's address, the client's report.

`ib_write_bw` is perftest's RDMA write bandwidth test (linux-rdma/perftest,
src/write_bw.c; options in src/perftest_parameters.c): run without a host it
is the server and waits for a client; given the server's address it is the
client. Both sides take the same symmetric options: `--use_cuda=<id>` puts
the buffers in that CUDA device's memory (GPUDirect RDMA, which needs
nvidia-peermem), `--report_gbits` reports in Gb/s (10^9 bits) instead of
MiB/s, `-s` is the message size, `-D` runs for that many seconds, `-F` keeps
the cpufreq warning quiet, and `-d` names the RDMA device (default: the
first found). The GID index is picked by perftest itself. A pod is given one
GPU, so its CUDA device is 0.

The report is a table (src/perftest_parameters.h RESULT_FMT_G and REPORT_FMT;
print_full_bw_report in src/perftest_parameters.c):

     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     1048576    46722            391.98             391.92		     0.046722

and without `--report_gbits` the same columns in MiB/sec (1 Gb/s = 119.2 MiB/s,
as its help says).

The server's address on the secondary network comes from Multus: the pod's
`k8s.v1.cni.cncf.io/network-status` annotation is a JSON list with one entry
per interface, `{"name", "interface", "ips", "mac", "default", "dns"}`
(k8snetworkplumbingwg/network-attachment-definition-client
pkg/apis/k8s.cni.cncf.io/v1/types.go NetworkStatus; Multus names a secondary
network `<namespace>/<name>`). The network is asked for with the
`k8s.v1.cni.cncf.io/networks` annotation, `<namespace>/<name>` (Multus
docs/how-to-use.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

NETWORKS = "k8s.v1.cni.cncf.io/networks"
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
POD_LABEL = "upi.openshift.io/rdma-bandwidth"  # server | client
PAIR_LABEL = "upi.openshift.io/rdma-pair"  # `<round>-<index in the round>`: the two pods of a pair
CONTAINER = "ib-write-bw"
PROGRAM = "ib_write_bw"
MIB_PER_GB = 10**9 / (2**20 * 8)  # perftest's help: Factor=10^9/(2^20*8)=119.2
_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MiB)/sec\]\s+BW average\[(Gb|MiB)/sec\]")


@dataclass(frozen=True)
class BandwidthTest:
    """What each side runs: message size (bytes) and duration (seconds); the same on both (SYMMETRIC)."""

    size: int = 1048576
    duration: int = 10


@dataclass(frozen=True)
class Figures:
    """The client's report: BW peak and average in Gb/s, with the size and iterations measured."""

    size: int
    iterations: int
    peak: float
    average: float


def command(test: BandwidthTest, device: str = "", server_ip: str | None = None) -> list[str]:
    """`ib_write_bw` with CUDA memory on the pod's one GPU; the client adds the server's address."""
    argv = [PROGRAM, *(["-d", device] if device else []), "--use_cuda=0", "--report_gbits",
            "-s", str(test.size), "-D", str(test.duration), "-F"]
    return argv + ([server_ip] if server_ip else [])


def pod(*, role: str, pair: str, node: str, namespace: str, image: str, argv: list[str], network: str,
        resources: dict[str, str], tolerations: list[Obj], service_account: str = "") -> Obj:
    """A test pod pinned to `node` by name, with one GPU, the RDMA device, the secondary network, IPC_LOCK.

    Pinned with a node affinity on `metadata.name` (as DaemonSets pin theirs):
    the scheduler still places it, so a node that lacks the resources leaves
    it Pending with the scheduler's reason, which the diagnosis quotes.
    IPC_LOCK lets perftest pin its buffers for the NIC, and it runs as root
    (the CUDA perftest images do); on OpenShift both need an SCC that allows
    them, which `service_account` is bound to (upi.gpu.rdma.test_account_objects).
    """
    account = {"serviceAccountName": service_account} if service_account else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": f"upi-rdma-{role}-",
            "namespace": namespace,
            "labels": {POD_LABEL: role, PAIR_LABEL: pair, "app.kubernetes.io/managed-by": "upi"},
            "annotations": {NETWORKS: network},
        },
        "spec": {
            "restartPolicy": "Never",
            **account,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            "tolerations": tolerations,
            "containers": [{
                "name": CONTAINER, "image": image, "command": argv,
                "resources": {"limits": dict(resources), "requests": dict(resources)},
                "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}, "runAsUser": 0},
            }],
        },
    }


def network_ip(pod_obj: Obj, network: str) -> str | None:
    """The pod's first address on `network` (`ns/name`) from Multus's network-status, if it has one yet."""
    raw = ((pod_obj.get("metadata") or {}).get("annotations") or {}).get(NETWORK_STATUS)
    if not raw:
        return None
    try:
        entries = json.loads(raw)
    except ValueError:
        return None
    short = network.split("/", 1)[-1]
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("default"):
            continue
        if entry.get("name") in (network, short):
            ips = entry.get("ips") or []
            return str(ips[0]).split("/", 1)[0] if ips else None
    return None


def parse(lines: list[str]) -> Figures | None:
    """The first result row under perftest's bandwidth header, in Gb/s (MiB/s converted); None if absent."""
    unit = ""
    for line in lines:
        found = _HEADER.search(line)
        if found:
            unit = found.group(2)
            continue
        cells = line.split()
        if not unit or len(cells) < 5 or not cells[0].isdigit():
            continue
        try:
            size, iters, peak, avg = int(cells[0]), int(cells[1]), float(cells[2]), float(cells[3])
        except ValueError:
            continue
        if unit == "MiB":
            peak, avg = peak / MIB_PER_GB, avg / MIB_PER_GB
        return Figures(size, iters, round(peak, 2), round(avg, 2))
    return None
