"""What perftest's `ib_write_bw` prints when a GPUDirect RDMA test runs (a fake's output, tests/fake_rdma.py).

linux-rdma/perftest: src/cuda_memory.c (the CUDA lines before the test:
"initializing CUDA", "Picking device No. N", the device name), src/
perftest_parameters.c ctx_print_test_info (the test's settings between two
RESULT_LINE rules) and print_full_bw_report (the result row, REPORT_FMT
" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf"), with the
header RESULT_FMT_G (Gb/sec, `--report_gbits`) or RESULT_FMT (MiB/sec) from
src/perftest_parameters.h. The default port is 18515.
"""

from __future__ import annotations

PERFTEST_PORT = 18515
RULE = "-" * 87 + "\n"
HEADER_GB = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
HEADER_MIB = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"


def report(argv: list[str], gbps: float, gbits: bool, *, server: bool = False) -> str:
    """perftest's RDMA_Write BW output around the result row (REPORT_FMT), peak a little above average."""
    size = int(argv[argv.index("-s") + 1]) if "-s" in argv else 65536
    duration = int(argv[argv.index("-D") + 1]) if "-D" in argv else 5
    iters = max(1, int(gbps * 1e9 / 8 / size * duration))
    peak, avg = gbps * 1.0005, gbps
    header = HEADER_GB
    if not gbits:
        mib = 10**9 / 8 / 2**20  # MiB/s per Gb/s: perftest measures bytes, then divides as it reports
        peak, avg, header = peak * mib, avg * mib, HEADER_MIB
    cuda = ("initializing CUDA\nListing all CUDA devices in system:\nCUDA device 0: PCIe address is 1B:00\n\n"
            "Picking device No. 0\n[pid = 1, dev = 0] device name = [NVIDIA H100 80GB HBM3]\n"
            "creating CUDA Ctx\nmaking it the current CUDA Ctx\n")
    info = (RULE + "                    RDMA_Write BW Test\n"
            " Dual-port       : OFF\t\tDevice         : mlx5_0\n"
            " Number of qps   : 1\t\tTransport type : IB\n"
            " Connection type : RC\t\tUsing SRQ      : OFF\n"
            " TX depth        : 128\n CQ Moderation   : 1\n Mtu             : 4096[B]\n"
            " Link type       : IB\n Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n"
            " Data ex. method : Ethernet\n" + RULE)
    rate = iters / duration / 1e6
    row = f" {size:<7}    {iters:<10}       {peak:<7.2f}            {avg:<7.2f}\t\t     {rate:<7.6f}\n"
    return cuda + info + (RULE if server else "") + RULE + header + row + RULE
