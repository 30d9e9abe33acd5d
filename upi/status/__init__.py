"""`upi status`: where each node's install stands, read from the logs and the API (docs/status.md)."""
