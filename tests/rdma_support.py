"""The dgxpod inventory with GPUDirect RDMA on its DGXs, for the rdma tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import INVENTORIES
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
