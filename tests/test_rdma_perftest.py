"""ib_write_bw's command, its report table, and the server's address from Multus (upi.gpu.rdma_perftest).

The report rows below are printed with perftest's own formats
(src/perftest_parameters.h: RESULT_FMT_G / RESULT_FMT headers, REPORT_FMT, and
REPORT_FMT_EXT, used when the average is below 0.1 Gb/s).
"""

from __future__ import annotations

import json

from upi.gpu.rdma_perftest import BandwidthTest, Figures, command, network_ip, parse

RULE = "-" * 87
GB = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
MIB = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
REPORT_FMT = " %-7lu    %-10lu       %-7.2f            %-7.2f\t\t     %-7.6f"
REPORT_FMT_EXT = " %-7lu    %lu           %-7.6f            %-7.6f            %-7.6f"


def _log(header: str, row: str) -> list[str]:
    return ["initializing CUDA", "Picking device No. 0", RULE, "                    RDMA_Write BW Test",
            " Link type       : IB", RULE, " local address: LID 0x05 QPN 0x0107 PSN 0x8d5a53", RULE,
            header, row, RULE]


def test_the_average_and_peak_are_read_in_gbits() -> None:
    row = REPORT_FMT % (1048576, 467220, 391.98, 391.92, 0.046722)
    assert parse(_log(GB, row)) == Figures(1048576, 467220, 391.98, 391.92)


def test_mib_per_second_is_converted_to_gbits() -> None:
    row = REPORT_FMT % (65536, 5000, 11920.93, 11444.09, 0.183105)
    figures = parse(_log(MIB, row))
    assert figures is not None and (figures.peak, figures.average) == (100.0, 96.0)


def test_a_tiny_figure_printed_with_more_digits_is_read() -> None:
    row = REPORT_FMT_EXT % (2, 5000, 0.081234, 0.054321, 3.395)
    figures = parse(_log(GB, row))
    assert figures is not None and figures.average == 0.05


def test_a_log_without_the_table_has_no_figures() -> None:
    assert parse(["initializing CUDA", "There are no available device(s) that support CUDA"]) is None
    assert parse([GB]) is None
    assert parse(["1048576 467220 391.98 391.92 0.046722"]) is None  # a row, but no header before it


def test_both_sides_run_the_same_symmetric_options_and_the_client_adds_the_server() -> None:
    test = BandwidthTest(size=4194304, duration=20)
    server, client = command(test, "mlx5_2"), command(test, "mlx5_2", "192.168.100.11")
    assert server == ["ib_write_bw", "-d", "mlx5_2", "--use_cuda=0", "--report_gbits", "-s", "4194304",
                      "-D", "20", "-F"]
    assert client == [*server, "192.168.100.11"]
    assert "-d" not in command(test)


def test_the_server_address_is_its_entry_on_the_named_secondary_network() -> None:
    status = [{"name": "ovn-kubernetes", "interface": "eth0", "ips": ["10.128.2.7"], "default": True},
              {"name": "nvidia-network-operator/rdma-ib", "interface": "net1", "ips": ["192.168.100.11"]},
              {"name": "other/net", "interface": "net2", "ips": ["172.16.0.4"]}]
    pod = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/network-status": json.dumps(status)}}}
    assert network_ip(pod, "nvidia-network-operator/rdma-ib") == "192.168.100.11"
    assert network_ip(pod, "other/net") == "172.16.0.4"
    assert network_ip(pod, "nvidia-network-operator/rdma-roce") is None
    assert network_ip({"metadata": {}}, "nvidia-network-operator/rdma-ib") is None
    broken = {"metadata": {"annotations": {"k8s.v1.cni.cncf.io/network-status": "[{"}}}
    assert network_ip(broken, "nvidia-network-operator/rdma-ib") is None
