"""The dgxpod inventory with GPUDirect RDMA on its DGXs, for the rdma tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import INVENTORIES
from fake_gpu import FakeGpuCluster, SimNode
from gpu_support import gpu_inventory

W0 = "ip: 10.33.3.44,\n     install_disk: /dev/nvme0n1, gpu: true, gpus: 8}"
W1 = "ip: 10.33.3.46,\n     install_disk: /dev/nvme0n1, gpu: true, gpus: 8}"
# Two DGX H100s on one InfiniBand fabric; each reaches the cluster through eno1 (not a fabric port).
IB = "ibp24s0, ibp64s0, ibp79s0, ibp94s0, ibp154s0, ibp192s0, ibp206s0, ibp220s0"


def rdma_inventory(tmp_path: Path, extra: str = "", w0: str | None = None, w1: str | None = None) -> Path:
    """dgxpod with 8 GPUs and an `rdma:` section on each DGX (`w0`/`w1` replace it; "" drops it)."""
    inv = gpu_inventory(tmp_path, extra)
    default = f"rdma: {{interfaces: [{IB}], link_type: infiniband, node_interface: eno1}}"
    text = inv.read_text()
    for anchor, rdma in ((W0, default if w0 is None else w0), (W1, default if w1 is None else w1)):
        assert anchor in text
        if rdma:
            text = text.replace(anchor, anchor[:-1] + f",\n     {rdma}}}")
    inv.write_text(text)
    for name in ("pull-secret.json", "id_rsa.pub"):  # validate reads them
        shutil.copy(INVENTORIES / name, tmp_path / name)
        (tmp_path / name).chmod(0o600)
    return inv


ROCE_PORTS = ["ens1f0np0", "ens1f1np1"]


def _rdma(fabric: str) -> str:
    ports = IB if fabric == "infiniband" else ", ".join(ROCE_PORTS)
    return f"rdma: {{interfaces: [{ports}], link_type: {fabric}, node_interface: eno1}}"


def dgx_inventory(tmp_path: Path, fabrics: list[str], extra: str = "") -> Path:
    """dgxpod with one DGX per entry of `fabrics` (worker-0, worker-1, then added ones) on that fabric."""
    inv = rdma_inventory(tmp_path, extra, w0=_rdma(fabrics[0]), w1=_rdma(fabrics[1]))
    added = "".join(
        f'\n  - {{name: worker-{i}, role: worker, mac: "b8:ce:f6:10:34:{i:02x}", ip: 10.33.3.{60 + i},\n'
        f"     install_disk: /dev/nvme0n1, gpu: true, gpus: 8,\n     {_rdma(fabric)}}}"
        for i, fabric in enumerate(fabrics) if i >= 2)
    text = inv.read_text()
    anchor = W1[:-1] + f",\n     {_rdma(fabrics[1])}}}"
    assert anchor in text
    inv.write_text(text.replace(anchor, anchor + added))
    return inv


def dgx_nodes(fabrics: list[str]) -> list[SimNode]:
    """The fake cluster's machines for `dgx_inventory`: three masters, one DGX H100 per fabric entry."""
    dgxs = [SimNode(f"worker-{i}", 8) for i in range(len(fabrics))]
    return [SimNode(f"master-{i}") for i in range(3)] + dgxs


def roce_ports(cluster: FakeGpuCluster, fabrics: list[str]) -> None:
    """The DGXs on Ethernet: their ConnectX ports are RoCE (PCI class 0200, link ether) in the fakes."""
    for i, fabric in enumerate(fabrics):
        if fabric == "ethernet":
            node = f"worker-{i}"
            cluster.network.ports[node], cluster.network.link[node] = ROCE_PORTS, "ether"
            sim = cluster.nodes[node]
            sim.devices = [{**d, "class": "0200"} if d["vendor"] == "15b3" else d for d in sim.devices]
