"""upi: OpenShift 4 bare-metal UPI from one inventory file."""

__version__ = "0.1.0"
# The distribution's name (pyproject.toml): what pipx names upi's virtualenv and
# what `pipx inject` takes. PyPI's project `upi` is someone else's; the command
# and this package stay `upi`.
DISTRIBUTION = "upi-openshift-dgx"
