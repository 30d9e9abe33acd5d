"""Every rule of csr.md on real CSRs (ECDSA and RSA), straight through the pure decision."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import inventory_path
from csr_cases import client, hostile, legitimate, serving

from upi.csr.decide import Approve, ClusterState, Skip, decide, pending_cap
from upi.facts.identity import node_identities
from upi.inventory import load_inventory

IDS = node_identities(load_inventory(inventory_path("dgxpod"), check_files=False))
STATE = ClusterState(frozenset({"worker-1"}), pending=3)


@pytest.mark.parametrize("spec", legitimate(), ids=lambda s: s.name)
def test_every_inventory_node_csr_is_approved(spec):
    state = STATE if spec.name != "client-worker-1" else ClusterState(frozenset(), 3)
    decision = decide(spec.csr(), IDS, state)
    assert decision == Approve(spec.name.split("-", 1)[0], spec.name.split("-", 1)[1])


@pytest.mark.parametrize("kind", sorted(hostile()))
def test_hostile_csr_is_skipped_with_a_reason(kind):
    decision = decide(hostile()[kind].csr(), IDS, STATE)
    assert isinstance(decision, Skip), decision
    assert decision.reason


def test_dns_sans_match_case_insensitively_and_ignore_a_trailing_dot():
    spec = serving("master-0", dns=("MASTER-0.dgxpod.NVIDIA.com.", "Master-0"))
    assert decide(spec.csr(), IDS, STATE) == Approve("serving", "master-0")


def test_node_registered_by_fqdn_is_approved():
    assert decide(client("master-2.dgxpod.nvidia.com").csr(), IDS, STATE) == Approve(
        "client", "master-2.dgxpod.nvidia.com")


def test_client_csr_is_skipped_when_the_node_exists_under_its_other_name():
    state = ClusterState(frozenset({"master-0.dgxpod.nvidia.com"}), 1)
    decision = decide(client("master-0").csr(), IDS, state)
    assert decision == Skip("Node 'master-0.dgxpod.nvidia.com' already exists: a client CSR for it "
                            "is a replay or an attack", "client", "master-0")


def test_older_bootstrapper_groups_and_key_encipherment_on_ecdsa_are_accepted():
    spec = replace(client("master-1"), groups=("system:serviceaccounts:openshift-machine-config-operator",
                                               "system:authenticated"),
                   usages=("digital signature", "key encipherment", "client auth"))
    assert decide(spec.csr(), IDS, STATE) == Approve("client", "master-1")


def test_nothing_is_approved_past_the_pending_cap():
    cap = pending_cap(IDS)
    assert cap == 5 + 100
    decision = decide(client("master-0").csr(), IDS, ClusterState(frozenset(), cap + 1))
    assert decision == Skip("106 CSRs pending, more than the inventory explains (105): approving nothing",
                            "client")
    assert decide(client("master-0").csr(), IDS, ClusterState(frozenset(), cap)) == Approve(
        "client", "master-0")


def test_a_decided_csr_is_left_alone():
    csr = replace(client("master-0").csr(), pending=False)
    assert decide(csr, IDS, STATE) == Skip("already approved or denied", "client")


def test_skip_reasons_name_the_failed_rule():
    cases = hostile()
    reason = {k: decide(cases[k].csr(), IDS, STATE).reason for k in  # type: ignore[union-attr]
              ("unknown-node", "prefix-evil", "serving-foreign-ip", "other-signer", "garbage-pem")}
    assert reason == {
        "unknown-node": "node 'intruder' is not in the inventory",
        "prefix-evil": "node 'master-0.evil' is not in the inventory",
        "serving-foreign-ip": "IP SAN 10.9.9.9 is not master-0's inventory IP 10.33.3.50",
        "other-signer": "signer 'kubernetes.io/kube-apiserver-client' is not a kubelet signer",
        "garbage-pem": reason["garbage-pem"],
    }
    assert reason["garbage-pem"].startswith("spec.request does not parse")
