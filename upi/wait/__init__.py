"""`upi wait`: drive openshift-install from PXE to "Install complete!"."""
