"""Disconnected sites: what oc-mirror must mirror, and proof the mirror registry holds it."""
