"""`upi check`: prove DNS, the load balancer and the HTTP server are ready.

Each checker turns the derived facts in `upi.facts` into probes, runs them
concurrently with a bound, a per-probe timeout and a retry, and returns
`CheckResult`s; `report` prints them as a table or JSON.
"""

from upi.check.report import CheckResult, Report, Verdict

__all__ = ["CheckResult", "Report", "Verdict"]
