"""`upi approve-csr`: approve exactly the inventory's node CSRs (docs/approve-csr.md)."""
