"""Day 2: workers joined to, or taken out of, an installed cluster (`upi nodes`, docs/day2.md)."""
