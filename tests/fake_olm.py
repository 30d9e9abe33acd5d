"""Fake OLM (the Operator Lifecycle Manager) of the fake GPU cluster: catalogs, Subscriptions, CSVs.

A fake, not a mock: it acts on the objects in the fake API server as OLM does
(operator-framework/operator-lifecycle-manager): a Subscription resolves through
its CatalogSource and PackageManifest channel to an InstallPlan (Manual ones wait
for approval), an approved plan installs the ClusterServiceVersion (the real
ones' facts, tests/data/) and serves its CRDs, and the CSV goes Pending to
Succeeded. `csv_succeeds[pkg] = False` keeps a package's CSV Installing forever.
"""

from __future__ import annotations

from fake_apiserver import FakeApiServer, Obj, now
from kube_schema import csv as real_csv

OLM = "operators.coreos.com/v1alpha1"
MARKETPLACE = "openshift-marketplace"


class FakeOlm:
    """OLM's catalog and install controllers, over the fake API server's store."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.csv_succeeds = {"nfd": True, "gpu-operator-certified": True, "nvidia-network-operator": True}
        self.approved_plans: list[str] = []
        self._csv_age: dict[str, int] = {}

    def seed(self) -> None:
        """The catalogs an installed OpenShift cluster has, and the packages they offer."""
        put = self.api.put
        for source in ("redhat-operators", "certified-operators"):
            put(
                {
                    "apiVersion": OLM,
                    "kind": "CatalogSource",
                    "metadata": {"name": source, "namespace": MARKETPLACE},
                    "spec": {"sourceType": "grpc"},
                    "status": {"connectionState": {"lastObservedState": "READY"}},
                }
            )
        for pkg, channels, default in (
            ("nfd", [("stable", "nfd.v5.0.0")], "stable"),
            (
                "gpu-operator-certified",
                [("v26.3", "gpu-operator-certified.v26.3.1"), ("v26.7", "gpu-operator-certified.v26.7.0")],
                "v26.3",
            ),
            # tests/data/network/bundle-annotations.json: channels stable,v26.4, default stable.
            ("nvidia-network-operator", [("stable", "nvidia-network-operator.v26.4.1"),
                                         ("v26.4", "nvidia-network-operator.v26.4.1")], "stable"),
        ):
            source = "redhat-operators" if pkg == "nfd" else "certified-operators"
            put(
                {
                    "apiVersion": "packages.operators.coreos.com/v1",
                    "kind": "PackageManifest",
                    "metadata": {"name": pkg, "namespace": MARKETPLACE, "labels": {"catalog": source}},
                    "status": {
                        "catalogSource": source,
                        "catalogSourceNamespace": MARKETPLACE,
                        "packageName": pkg,
                        "defaultChannel": default,
                        "channels": [{"name": c, "currentCSV": csv} for c, csv in channels],
                    },
                }
            )

    def tick(self) -> None:
        """One pass of OLM's controllers: Subscriptions to InstallPlans, approved plans run, CSVs progress."""
        for sub in self.api.list(OLM, "Subscription"):
            ns, spec, st = sub["metadata"]["namespace"], sub["spec"], sub.get("status") or {}
            if not st.get("installPlanRef"):
                self._resolve(sub)
                continue
            plan = self.api.get(OLM, "InstallPlan", st["installPlanRef"]["name"], ns)
            if plan and plan["spec"]["approved"] and plan["status"]["phase"] == "RequiresApproval":
                self.approved_plans.append(plan["metadata"]["name"])
                self.api.set_status(
                    OLM, "InstallPlan", plan["metadata"]["name"], ns, {**plan["status"], "phase": "Complete"}
                )
                self._install_csv(spec["name"], plan["spec"]["clusterServiceVersionNames"][0], ns)
                for crd in real_csv(spec["name"])["spec"]["customresourcedefinitions"]["owned"]:
                    plural, _, group = crd["name"].partition(".")
                    self.api.serve(group, plural)  # the plan created the CSV's CRDs
        for csv in self.api.list(OLM, "ClusterServiceVersion"):
            self._progress_csv(csv)

    def _resolve(self, sub: Obj) -> None:
        ns, spec = sub["metadata"]["namespace"], sub["spec"]
        pkg = self.api.get("packages.operators.coreos.com/v1", "PackageManifest", spec["name"], MARKETPLACE)
        source = self.api.get(OLM, "CatalogSource", spec["source"], spec["sourceNamespace"])
        groups = self.api.list("operators.coreos.com/v1", "OperatorGroup", ns)
        channel = next(
            (
                c
                for c in (pkg or {}).get("status", {}).get("channels", [])
                if c["name"] == spec.get("channel")
            ),
            None,
        )
        problem = None
        state = ((source or {}).get("status") or {}).get("connectionState", {}).get("lastObservedState")
        if source is not None and state != "READY":
            # OLM resolves nothing from an unhealthy catalog: it says so and makes no InstallPlan
            # (operator-lifecycle-manager pkg/controller/operators/catalog/subscription/reconciler.go,
            # catalogHealthReconciler.updateHealth).
            where = f"{spec['sourceNamespace']}/{spec['source']}"
            self._condition(sub, {"type": "CatalogSourcesUnhealthy", "status": "True",
                                  "reason": "UnhealthyCatalogSourceFound",
                                  "message": f"targeted catalogsource {where} unhealthy"})
            return
        if source is None:
            problem = f"catalogsource {spec['sourceNamespace']}/{spec['source']} not found"
        elif pkg is None or channel is None:
            problem = f"no operators found in channel {spec.get('channel')} of package {spec['name']}"
        elif len(groups) != 1:
            problem = f"found {len(groups)} operatorgroups in namespace {ns}; want exactly one"
        if problem:
            cond = {
                "type": "ResolutionFailed",
                "status": "True",
                "reason": "ConstraintsNotSatisfiable",
                "message": problem,
            }
            self._condition(sub, cond)
            return
        assert channel is not None
        csv_name = spec.get("startingCSV") or channel["currentCSV"]
        manual = spec.get("installPlanApproval") == "Manual"
        plan_name = (
            f"install-{csv_name.split('.v')[-1].replace('.', '')}{len(self.api.list(OLM, 'InstallPlan'))}"
        )
        plan = self.api.put(
            {
                "apiVersion": OLM,
                "kind": "InstallPlan",
                "metadata": {"name": plan_name, "namespace": ns},
                "spec": {
                    "approval": "Manual" if manual else "Automatic",
                    "approved": not manual,
                    "clusterServiceVersionNames": [csv_name],
                    "generation": 1,
                },
                "status": {"phase": "RequiresApproval", "catalogSources": [spec["source"]], "plan": []},
            }
        )
        self.api.set_status(
            OLM,
            "Subscription",
            sub["metadata"]["name"],
            ns,
            {
                "currentCSV": csv_name,
                "state": "UpgradePending",
                "installPlanRef": {
                    "apiVersion": OLM,
                    "kind": "InstallPlan",
                    "name": plan_name,
                    "namespace": ns,
                },
                "installplan": {
                    "apiVersion": OLM,
                    "kind": "InstallPlan",
                    "name": plan_name,
                    "uuid": plan["metadata"]["uid"],
                },
                "lastUpdated": now(),
            },
        )

    def _condition(self, sub: Obj, cond: Obj) -> None:
        if (sub.get("status") or {}).get("conditions") != [cond]:
            meta = sub["metadata"]
            self.api.set_status(OLM, "Subscription", meta["name"], meta["namespace"],
                                {"conditions": [cond], "lastUpdated": now()})

    def _install_csv(self, package: str, name: str, ns: str) -> None:
        doc = real_csv(package)
        doc["metadata"] = {"name": name, "namespace": ns, "annotations": doc["metadata"]["annotations"]}
        doc["status"] = {"phase": "Pending", "reason": "RequirementsUnknown"}
        self.api.put(doc)
        self._csv_age[f"{ns}/{name}"] = 0

    def _progress_csv(self, csv: Obj) -> None:
        key = f"{csv['metadata']['namespace']}/{csv['metadata']['name']}"
        package = csv["metadata"]["name"].split(".v")[0]
        age = self._csv_age.get(key, 0) + 1
        self._csv_age[key] = age
        phase = csv["status"]["phase"]
        if phase == "Succeeded":
            return
        if not self.csv_succeeds[package]:
            if phase != "Installing":
                msg = "installing: waiting for deployment gpu-operator to become ready: "
                msg += 'deployment "gpu-operator" not available'
                self._csv_phase(csv, "Installing", "InstallWaiting", msg)
            return
        if age >= 3:
            self._csv_phase(csv, "Succeeded", "InstallSucceeded", "install strategy completed with no errors")
            for sub in self.api.list(OLM, "Subscription", csv["metadata"]["namespace"]):
                st = sub.get("status") or {}
                if st.get("currentCSV") == csv["metadata"]["name"] and st.get("state") != "AtLatestKnown":
                    self.api.set_status(
                        OLM,
                        "Subscription",
                        sub["metadata"]["name"],
                        sub["metadata"]["namespace"],
                        {
                            **st,
                            "state": "AtLatestKnown",
                            "installedCSV": csv["metadata"]["name"],
                            "lastUpdated": now(),
                        },
                    )

    def _csv_phase(self, csv: Obj, phase: str, reason: str, message: str) -> None:
        meta = csv["metadata"]
        self.api.set_status(
            OLM,
            "ClusterServiceVersion",
            meta["name"],
            meta["namespace"],
            {"phase": phase, "reason": reason, "message": message},
        )

    def operator_ready(self, prefix: str) -> bool:
        """Whether the CSV of an operator (its name's prefix) has Succeeded."""
        return any(
            c["metadata"]["name"].startswith(prefix) and c["status"]["phase"] == "Succeeded"
            for c in self.api.list(OLM, "ClusterServiceVersion")
        )
