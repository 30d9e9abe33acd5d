"""What a validation pod prints: the images the fake registry holds and what their commands output (a fake).

A pod runs its image's command (`command` replaces the image's entrypoint, as in
Kubernetes) and its log holds only what that command prints:

- `nvcr.io/nvidia/k8s/cuda-sample:vectoradd-*` runs the CUDA vectorAdd sample
  (NVIDIA/cuda-samples Samples/0_Introduction/vectorAdd/vectorAdd.cu): "[Vector addition of
  50000 elements]" ... "Test PASSED", "Done"; without a GPU it fails with "Failed to allocate
  device vector A (error code ...)!". NVIDIA's GPU Operator docs use it as the workload check.
- `nvcr.io/nvidia/cuda:*` and `nvidia/cuda:*` (Docker Hub) are the CUDA base images: their
  entrypoint prints the "== CUDA ==" banner and runs the command, `bash` by default, which
  without a terminal exits 0 at once.
- `nvidia-smi` is in every container that is given a GPU: the NVIDIA container runtime mounts
  it when NVIDIA_DRIVER_CAPABILITIES includes `utility`, as the CUDA images set.
  `nvidia-smi -L` prints `GPU 0: <name> (UUID: GPU-...)`; `nvidia-smi` its table.

- `nvcr.io/nvidia/cloud-native/dcgm:*` (the GPU Operator's DCGM image) runs `dcgmi diag -r N`
  and prints its table as DCGM 4 does (NVIDIA/DCGM dcgmi/Diag.cpp; the output quoted in
  NVIDIA/DCGM issue 124): Metadata rows, then per category each test's row and one
  `GPUn: <result>` row per GPU given to the pod. The tests by level follow the DCGM user
  guide's run levels (software; + pcie, memory; + diagnostic and the stress tests; + memtest,
  pulse_test). A failing test exits non-zero, as dcgmi returns an error for a failed diag.

An image the registry does not hold cannot be pulled (ErrImagePull, then ImagePullBackOff),
as on a disconnected cluster that lacks the mirror; a program the image lacks does not
start (StartError, exit code 128, "executable file not found in $PATH"). A shell script is
beyond this fake: it says so as a controller error instead of guessing its output.
"""

from __future__ import annotations

from dataclasses import dataclass

VECTORADD_LOG = (
    "[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA device\n"
    "CUDA kernel launch with 196 blocks of 256 threads\nCopy output data from the CUDA device "
    "to the host memory\nTest PASSED\nDone\n"
)
NO_GPU = "Failed to allocate device vector A (error code no CUDA-capable device is detected)!\n"
CUDA_BANNER = "\n==========\n== CUDA ==\n==========\n\nCUDA Version 12.5.0\n\n"
VECTORADD_PROGRAMS = ("vectorAdd", "./vectorAdd", "/cuda-samples/vectorAdd")


class UnsupportedCommand(Exception):
    """A command whose output this fake cannot know (a shell script)."""


@dataclass(frozen=True)
class Outcome:
    """How the container ends: a pull that fails, or an exit with its log."""

    log: str = ""
    exit_code: int = 0
    reason: str = "Completed"  # terminated reason, or the waiting reason of a pull that fails
    message: str = ""
    pulled: bool = True


def _kind(image: str) -> str | None:
    repo = image.split("@", 1)[0].rsplit(":", 1)[0]
    if repo == "nvcr.io/nvidia/k8s/cuda-sample" and ":vectoradd-" in image:
        return "vectoradd"
    if repo in ("nvcr.io/nvidia/cuda", "nvidia/cuda", "docker.io/nvidia/cuda"):
        return "cuda"
    if repo == "nvcr.io/nvidia/cloud-native/dcgm":
        return "dcgm"
    return None


def _smi(args: list[str], gpu_name: str) -> str:
    if args == ["-L"]:
        return f"GPU 0: {gpu_name} (UUID: GPU-3b6e2a1c-5d0f-4e8a-9c71-0f2d1b7a6e54)\n"
    return ("+-----------------------------------------------------------------------------------------+\n"
            "| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |\n"
            "|=========================================+========================+======================|\n"
            f"|   0  {gpu_name:<34} On |   00000000:1B:00.0 Off |                    0 |\n"
            "+-----------------------------------------------------------------------------------------+\n")


DIAG_TESTS = {  # level -> (category, test) added at that level
    1: [("Deployment", "software")],
    2: [("Integration", "pcie"), ("Hardware", "memory")],
    3: [("Hardware", "diagnostic"), ("Stress", "targeted_stress"), ("Stress", "targeted_power"),
        ("Stress", "memory_bandwidth")],
    4: [("Hardware", "memtest"), ("Stress", "pulse_test")],
}


def _row(left: str, right: str) -> str:
    return f"| {left:<25} | {right:<46} |\n"


def dcgmi_diag(level: int, gpus: int, fails: tuple[int, str] | None) -> tuple[str, int]:
    """`dcgmi diag -r level`'s table for `gpus` GPUs; `fails`: (GPU index, test) that fails."""
    tests = [t for lvl in range(1, level + 1) for t in DIAG_TESTS[lvl]]
    rule = "+" + "-" * 27 + "+" + "-" * 48 + "+\n"
    out = ["Successfully ran diagnostic for group.\n", rule, _row("Diagnostic", "Result"),
           "+" + "=" * 27 + "+" + "=" * 48 + "+\n",
           "|-----  Metadata  ----------+------------------------------------------------|\n",
           _row("DCGM Version", "4.6.0"), _row("Driver Version Detected", "580.95.05"),
           _row("GPU Device IDs Detected", ",".join(["2330"] * gpus))]
    category = "Metadata"
    failed = False
    for cat, test in tests:
        if cat != category:
            out.append(f"+-----  {cat}  " + "-" * max(1, 19 - len(cat)) + "+" + "-" * 48 + "+\n")
            category = cat
        bad = fails is not None and fails[1] == test and fails[0] < gpus
        failed = failed or bad
        out.append(_row(test, "Fail" if bad else "Pass"))
        out += [_row("", f"GPU{i}: {'Fail' if bad and fails and i == fails[0] else 'Pass'}")
                for i in range(gpus)]
    out.append(rule)
    return "".join(out), (226 if failed else 0)


def run(image: str, command: list[str] | None, *, gpus: int, gpu_name: str,
        cuda_error: str | None, diag_fails: tuple[int, str] | None = None) -> Outcome:
    """What the container prints and how it exits, given `gpus` GPUs (or MIG devices) it was given.

    `cuda_error`: what a CUDA program prints on this node when CUDA cannot start (the node's fault).
    """
    kind = _kind(image)
    if kind is None:
        return Outcome(reason="ErrImagePull", pulled=False,
                       message=f"initializing source docker://{image}: reading manifest: manifest unknown")
    argv = list(command) if command else (["vectorAdd"] if kind == "vectoradd" else ["bash"])
    banner = CUDA_BANNER if kind == "cuda" and not command else ""
    program, args = argv[0], argv[1:]
    if program in ("bash", "sh", "/bin/sh", "/bin/bash"):
        if args:
            raise UnsupportedCommand(f"the fake cannot run the shell script {argv!r}")
        return Outcome(log=banner)
    if program in ("nvidia-smi", "/usr/bin/nvidia-smi") and gpus:
        return Outcome(log=banner + _smi(args, gpu_name))
    if kind == "dcgm" and program in ("dcgmi", "/usr/bin/dcgmi") and args[:2] == ["diag", "-r"]:
        if not gpus:
            return Outcome(log="Error: No GPUs found to run the diagnostic on\n", exit_code=1, reason="Error")
        log, code = dcgmi_diag(int(args[2]), gpus, diag_fails)
        return Outcome(log=log, exit_code=code, reason="Error" if code else "Completed")
    if kind == "vectoradd" and program in VECTORADD_PROGRAMS:
        if not gpus:
            return Outcome(log=banner + "[Vector addition of 50000 elements]\n" + NO_GPU, exit_code=1,
                           reason="Error")
        if cuda_error:
            return Outcome(log=banner + "[Vector addition of 50000 elements]\n" + cuda_error, exit_code=1,
                           reason="Error")
        return Outcome(log=banner + VECTORADD_LOG)
    return Outcome(exit_code=128, reason="StartError",
                   message=f'exec: "{program}": executable file not found in $PATH')
