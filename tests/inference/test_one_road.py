"""The text path's refactor changes nothing a user sees: a run trained here translates the probe of
scripts/tools/text_probe.py (paragraphs, capitals, links, addresses, emoji, paths, code, numbers,
markup, glossary terms, a prefix, n-best lists; through `nmt.load`, `nmt translate`, `nmt eval` and
`nmt serve`) identically with the code the refactor started from, checked out in a git worktree,
and with this code. And the script that counts the functions one translation enters counts them."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nmt
from nmt.inference.text import road

from tests.conftest import REPO

# The commit the text path's refactor starts from: what every output must still be.
BEFORE = "cd4dfb5376b92c9fc0634e790a30e25548d9003d"
PROBE = REPO / "scripts" / "tools" / "text_probe.py"
CUT = re.compile(r"^line \d+: the (translation reached its length cap|source was cut)")


def _worktree_at(commit: str, where: Path) -> Path:
    """`commit` checked out at `where` (skipped where the repository has no such history: a tarball,
    a shallow clone)."""
    git = ["git", "-C", str(REPO)]
    if subprocess.run([*git, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode:
        pytest.skip(f"the repository holds no commit {commit[:7]} (a shallow clone?)")
    subprocess.run([*git, "worktree", "add", "--detach", "-q", str(where), commit], check=True)
    return where


def _probe(run: Path, out: Path, code: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run([sys.executable, str(PROBE), str(run), "--out", str(out)], check=True, env=env,
                   cwd=out.parent, timeout=600)
    return json.loads(out.read_text(encoding="utf-8"))


def _without_warnings(probed):
    """What a probe printed less the warnings of a cut, which the text path says since (the server's
    `warnings` field, the command's line naming the input line): the translations themselves."""
    if isinstance(probed, dict):
        return {key: _without_warnings(value) for key, value in probed.items() if key != "warnings"}
    if isinstance(probed, list):
        return [_without_warnings(value) for value in probed]
    if isinstance(probed, str):
        return "\n".join(line for line in probed.split("\n") if not CUT.search(line))
    return probed


def _without_cleaning_keys(run: Path, copy: Path) -> Path:
    """`run` as the code before cleaning reads it: its config (the YAML and each checkpoint's) without
    the data.drop_* keys that code would refuse as unknown. They shape the prepared corpus only."""
    import torch
    import yaml

    shutil.copytree(run, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text(encoding="utf-8"))
    config["data"] = {k: v for k, v in config["data"].items() if not k.startswith("drop_")}
    (copy / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    for checkpoint in copy.glob("*.pt"):
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        state["config"]["data"] = {k: v for k, v in state["config"]["data"].items() if not k.startswith("drop_")}
        torch.save(state, checkpoint)
    return copy


def test_the_refactored_text_path_translates_as_before(protected_run, tmp_path):
    before = _worktree_at(BEFORE, tmp_path / "before")
    try:
        old = _probe(_without_cleaning_keys(protected_run, tmp_path / "old-run"), tmp_path / "old.json", before)
        old = json.loads(json.dumps(old).replace(str(tmp_path / "old-run"), str(protected_run)))  # (eval names it)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)], check=False)
    new = _probe(protected_run, tmp_path / "new.json", REPO)
    assert new["api"]["glossary"] and "exit 0" in new["command"]["eval"]  # (the probe went through every door)
    assert _without_warnings(new) == _without_warnings(old)


def test_the_text_path_is_counted(protected_run):
    counted = subprocess.run([sys.executable, str(REPO / "scripts" / "tools" / "text_path.py"), str(protected_run),
                              "--list"], check=True, capture_output=True, text=True, timeout=300).stdout
    total, outside = [int(word) for word in counted.split() if word.isdigit()][:3:2]
    assert 0 < outside < total
    assert "inference/decoding/search.py: " in counted and "search" in counted.split("inference/decoding/search.py: ")[1]


def test_a_stage_of_ones_own_is_one_module_and_one_list(protected_run, monkeypatch):
    """docs/layout.md's profanity filter, as written there: appended to the road's FILTERS, it writes
    each blocked word of every translation as asterisks (here the toy model's "chat")."""
    layout = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(# nmt/inference/text/profanity.py\n.*?)```", layout, re.DOTALL).group(1)
    assert len(example.splitlines()) <= 20
    monkeypatch.setattr(road, "FILTERS", [])
    module: dict = {}
    exec(compile(example, "profanity.py", "exec"), module)
    assert len(road.FILTERS) == 1
    model = nmt.load(protected_run)
    plain = model.translate(["I see a cat.", "I see a dog. I see a cat."])
    module["BLOCKED"] = re.compile(r"\bchat\b")
    filtered = model.translate(["I see a cat.", "I see a dog. I see a cat."])
    assert all("chat" in out for out in plain), plain
    assert filtered == [out.replace("chat", "****") for out in plain]
