"""Safety: loading an artifact never executes code, `import papa` / `papa --help` need no network (nor torch), and
nothing in papa unpickles. (The offline model and local data with every socket refused: test_reliability.py.)"""
from __future__ import annotations

import ast
import pathlib
import pickle
import subprocess
import sys

import pytest

import papa
from conftest import REPO
from papa.method.constants import load_constants
from papa.method.rankings import load_ranking

_IMPORT_WITHOUT_NETWORK = """
import socket, sys
attempts = []
def refuse(*args, **kwargs):
    attempts.append(args)
    raise OSError("network disabled by the test")
socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
import papa, papa.cli
try:
    papa.cli.main(["--help"])
except SystemExit as exit:
    assert exit.code == 0, exit.code
heavy = sorted(m for m in ("torch", "transformers", "datasets", "huggingface_hub", "pandas") if m in sys.modules)
print("attempts", len(attempts), "heavy", heavy)
"""


def test_import_and_help_make_no_network_call():
    done = subprocess.run([sys.executable, "-c", _IMPORT_WITHOUT_NETWORK], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "extract" in done.stdout and "probe" in done.stdout  # the help was printed
    assert done.stdout.strip().splitlines()[-1] == "attempts 0 heavy []"


class _Payload:
    """Unpickling this creates a file: proof that code ran."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.mark.parametrize("loader", [load_constants, load_ranking])
def test_a_pickle_posing_as_an_artifact_is_refused_without_running_it(tmp_path, loader):
    marker = tmp_path / "code-ran"
    path = tmp_path / "artifact.safetensors"
    path.write_bytes(pickle.dumps({"matrices": _Payload(str(marker))}))  # a pickle under an artifact's name
    with pytest.raises(papa.CorruptArtifactError, match="not a readable safetensors"):
        loader(path)
    assert not marker.exists()
    pickle.loads(path.read_bytes())  # the payload is live: an unpickling loader would have run it
    assert marker.exists()


def _calls(tree: ast.AST, dotted: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == dotted:
            yield node


def test_no_unsafe_deserialisation_in_papa():
    """Any torch.load passes weights_only=True; nothing imports pickle or trusts remote code."""
    sources = sorted((REPO / "papa").rglob("*.py"))
    assert sources
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for call in _calls(tree, "torch.load"):
            kw = {k.arg: k.value for k in call.keywords}
            assert isinstance(kw.get("weights_only"), ast.Constant) and kw["weights_only"].value is True, \
                f"{path.name}:{call.lineno}: torch.load without weights_only=True"
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                assert not {"pickle", "dill", "cloudpickle"} & set(names), f"{path.name}:{node.lineno}: pickle"
            if isinstance(node, ast.keyword) and node.arg == "trust_remote_code":
                assert isinstance(node.value, ast.Constant) and node.value.value is False, \
                    f"{path.name}:{node.value.lineno}: trust_remote_code"
