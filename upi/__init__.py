"""upi: OpenShift 4 bare-metal UPI from one inventory file."""

__version__ = "0.1.0"
