"""GPU day 2: Node Feature Discovery + NVIDIA GPU Operator, installed and proven per node."""
