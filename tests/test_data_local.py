"""The suite passes from a clone alone: upstream facts come from tests/data/, never from ../shared."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repo_guard import shared_paths

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
EXTRACTOR = DATA / "extract.py"  # the one program that reads the reference data; no test runs it on it
# Named on purpose: the extractor reads the directory, the guard watches it, this module holds
# samples of its spellings. Their reads at test time are still caught by the audit hook.
NAMES_IT = {EXTRACTOR, TESTS / "repo_guard.py", Path(__file__).resolve()}


def _test_sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p not in NAMES_IT) + sorted(
        p for p in (TESTS / "fakes").iterdir() if p.is_file())


def test_no_test_module_names_the_shared_directory_as_a_path() -> None:
    found = [hit for p in _test_sources()
             for hit in shared_paths(p.read_text(encoding="utf-8"), str(p.relative_to(TESTS.parent)))]
    assert found == []


@pytest.mark.parametrize("source", [
    'GPU_DATA = ROOT.parent / "shared" / "data" / "gpu"\n',
    'text = Path("../shared/data/gpu/nvidia.com_clusterpolicies.yaml").read_text()\n',
    'path = os.path.join(root, "..", "shared", "data")\n',
    'path = f"{root}/../shared/data/{area}"\n',
    'def f():\n    return open(r"..\\\\shared\\\\data\\\\x")\n',
])
def test_the_scan_finds_the_shared_directory_in_every_spelling(source: str) -> None:
    assert len(shared_paths(source)) == 1, source


def test_the_scan_leaves_prose_and_other_words_alone() -> None:
    source = ('"""Facts from ../shared/reference/gpu-day2.md."""\n'
              'def test_a_shared_bmc():\n    """As ../shared/data/gpu/README.md says."""\n'
              '    name = "shared-bmc"; other = "sharedfs/x"; label = "not shared"\n')
    assert shared_paths(source) == []


def _guarded_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A repository holding this conftest and guard, and a `shared/` reference directory beside it."""
    repo, shared = tmp_path / "repo", tmp_path / "shared"
    (repo / "tests").mkdir(parents=True)
    for name in ("conftest.py", "repo_guard.py", "group_times.py"):
        shutil.copy(TESTS / name, repo / "tests" / name)
    (repo / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
    (shared / "data" / "gpu").mkdir(parents=True)
    (shared / "data" / "gpu" / "crd.yaml").write_text("kind: CustomResourceDefinition\n")
    return repo, shared


def _pytest(repo: Path, body: str) -> subprocess.CompletedProcess[str]:
    (repo / "tests" / "test_probe.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", str(repo / "tests")],
                          cwd=repo, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_a_test_that_reads_the_shared_directory_fails(tmp_path: Path) -> None:
    repo, _ = _guarded_tree(tmp_path)
    result = _pytest(repo, (
        "from pathlib import Path\n"
        "SHARED = Path(__file__).resolve().parents[2] / 'shared'\n"
        "def test_reads_it():\n    assert (SHARED / 'data' / 'gpu' / 'crd.yaml').read_text()\n"
        "def test_lists_it():\n    assert [p.name for p in (SHARED / 'data').iterdir()] == ['gpu']\n"
        "def test_reads_nothing_there():\n    assert Path(__file__).read_text()\n"))
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 failed, 1 passed" in out, out
    assert "read outside the repository (shared/data/gpu/crd.yaml)" in out, out
    assert "read outside the repository (shared/data)" in out, out


def test_a_read_at_import_time_fails_the_session(tmp_path: Path) -> None:
    repo, shared = _guarded_tree(tmp_path)
    shutil.rmtree(shared)  # a clone: the directory is not there, the attempt still counts
    result = _pytest(repo, (
        "from pathlib import Path\n"
        "try:\n    Path(__file__).resolve().parents[2].joinpath('shared', 'data', 'x.json').read_text()\n"
        "except OSError:\n    pass\n"
        "def test_passes():\n    pass\n"))
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 passed" in out and "read outside the repository (shared/data/x.json)" in out, out


def test_every_extracted_file_names_its_origin_and_licence() -> None:
    files = sorted(DATA.glob("*/*.json"))
    assert {p.parent.name for p in files} == {"gpu", "network", "tuning"}
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for path in files:
        origin = json.loads(path.read_text(encoding="utf-8"))["origin"]
        assert origin["licence"] == "Apache-2.0", path.name
        assert origin["project"] in readme and origin["file"] and origin["version"], path.name
    assert "Apache License" in (DATA / "LICENSE").read_text(encoding="utf-8")


def _extractor():
    spec = importlib.util.spec_from_file_location("extract", EXTRACTOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_extractor_keeps_facts_and_drops_prose(tmp_path: Path) -> None:
    src = tmp_path / "data"
    for area in ("gpu", "network", "tuning"):
        (src / area).mkdir(parents=True)
    (src / "gpu" / "nvidia.com_clusterpolicies.yaml").write_text(
        "kind: CustomResourceDefinition\nmetadata: {name: clusterpolicies.nvidia.com}\n"
        "spec:\n  group: nvidia.com\n  scope: Cluster\n"
        "  names: {kind: ClusterPolicy, plural: clusterpolicies, singular: clusterpolicy}\n"
        "  versions:\n  - name: v1\n    served: true\n    storage: true\n"
        "    subresources: {status: {}}\n    schema:\n      openAPIV3Schema:\n"
        "        description: prose\n        type: object\n        properties:\n"
        "          description: {type: string, description: a field named description stays}\n"
        "          spec:\n            type: object\n            description: prose\n"
        "            properties: {mode: {type: string, enum: [a, b], default: a}}\n")
    (src / "gpu" / "nfd.clusterserviceversion.yaml").write_text(
        "kind: ClusterServiceVersion\nmetadata:\n  name: nfd.v5.0.0\n  annotations:\n"
        "    alm-examples: '[{\"kind\": \"NodeFeatureDiscovery\", \"spec\": {}}]'\n"
        "    operatorframework.io/suggested-namespace: openshift-nfd\n"
        "spec: {version: 5.0.0, description: prose, customresourcedefinitions: {owned: []}}\n")
    files = _extractor().extract(src)
    assert sorted(files) == ["gpu/crd-nvidia.com_clusterpolicies.json", "gpu/csv-nfd.json"]
    crd = json.loads(files["gpu/crd-nvidia.com_clusterpolicies.json"])
    mode = {"type": "string", "enum": ["a", "b"], "default": "a"}
    assert crd["versions"][0]["openAPIV3Schema"] == {"type": "object", "properties": {
        "description": {"type": "string"}, "spec": {"type": "object", "properties": {"mode": mode}}}}
    assert crd["origin"]["project"] == "NVIDIA/gpu-operator"
    csv = json.loads(files["gpu/csv-nfd.json"])
    assert csv["almExamples"] == [{"kind": "NodeFeatureDiscovery", "spec": {}}]
    assert csv["suggestedNamespace"] == "openshift-nfd" and "prose" not in files["gpu/csv-nfd.json"]


def test_the_extractor_refuses_a_file_without_a_recorded_origin(tmp_path: Path) -> None:
    src = tmp_path / "data"
    for area in ("gpu", "network", "tuning"):
        (src / area).mkdir(parents=True)
    (src / "tuning" / "new.yaml").write_text("kind: CustomResourceDefinition\n")
    extract = _extractor()
    with pytest.raises(extract.ExtractError, match="tuning/new.yaml: no origin recorded"):
        extract.extract(src)
