# SPDX-License-Identifier: MIT
"""docs/ci.md's examples (docs/examples/github-actions.yml, docs/examples/Dockerfile) name only
what exists here: make targets, build/ programs, repository paths, the CLI's subcommands and
options, the harness's options and Debian packages that tools/scripts/deps.sh knows. Nothing
runs: the files cannot go stale without this failing. CPU only, a second or two."""
import os
import re
import shlex
import subprocess
import sys

import pytest

import simfabric_pytest

ROOT = simfabric_pytest.ROOT
WORKFLOW = os.path.join(ROOT, "docs", "examples", "github-actions.yml")
DOCKERFILE = os.path.join(ROOT, "docs", "examples", "Dockerfile")
CI_MD = os.path.join(ROOT, "docs", "ci.md")
# The checkout of simfabric beside the user's code in the workflow's plugin job.
CHECKOUT = "simfabric/"
# Packages the examples install that deps.sh does not name, and why.
EXTRA_PACKAGES = {
    "libc6-dev": "the C headers, which gcc only recommends (Dockerfile: --no-install-recommends)",
}


def read(path):
    with open(path) as f:
        return f.read()


def workflow_scripts():
    """The run: scripts of the workflow, without a YAML parser: `run: CMD` or `run: |` and the
    lines indented below it."""
    out, lines = [], read(WORKFLOW).splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r"^(\s*)(?:- )?run:\s*(.*)$", ln)
        if not m:
            continue
        if m.group(2) not in ("|", ">"):
            out.append(m.group(2))
            continue
        indent, body = len(m.group(1)), []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt.strip())
        out.append("\n".join(body))
    return out


def dockerfile_scripts():
    text = read(DOCKERFILE).replace("\\\n", " ")
    out = []
    for ln in text.splitlines():
        m = re.match(r"^(RUN|CMD)\s+(.*)$", ln.strip())
        if m and m.group(2).startswith("["):
            out.append(" ".join(eval(m.group(2))))  # an exec-form list of strings
        elif m:
            out.append(m.group(2))
    # The usage lines in its comments are commands too.
    out += [ln.lstrip("# ").split("  #")[0] for ln in text.splitlines()
            if re.match(r"^#\s+docker ", ln)]
    return out


def ci_md_scripts():
    return re.findall(r"^```\n(.*?)^```", read(CI_MD), re.S | re.M)


def commands(scripts):
    """Each simple command of the scripts as a list of words."""
    for script in scripts:
        for line in script.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0]
            for part in re.split(r"&&|\|\||[;|]", line):
                try:
                    words = shlex.split(part)
                except ValueError:
                    words = part.split()
                if words and words[0] == "sudo":
                    words = words[1:]
                if words:
                    yield words


ALL = pytest.mark.parametrize("name,scripts", [("github-actions.yml", workflow_scripts),
                                               ("Dockerfile", dockerfile_scripts),
                                               ("ci.md", ci_md_scripts)])


def make_targets():
    text = read(os.path.join(ROOT, "Makefile"))
    targets = set()
    for m in re.finditer(r"^([A-Za-z0-9_. -]+?)\s*:(?![=:])", text, re.M):
        targets.update(m.group(1).split())
    for m in re.finditer(r"^\.PHONY:((?:.*\\\n)*.*)$", text, re.M):
        targets.update(m.group(1).replace("\\\n", " ").split())
    return targets


def test_30_01_the_workflow_is_yaml_github_can_run():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(read(WORKFLOW))
    assert ("on" in doc or True in doc) and doc.get("name"), doc  # YAML 1.1 reads `on` as True
    assert set(doc["jobs"]) == {"simfabric", "plugin"}, doc["jobs"]
    for name, job in doc["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest", name
        for step in job["steps"]:
            assert ("run" in step) != ("uses" in step), (name, step)
    assert len(workflow_scripts()) == sum(
        "run" in s for j in doc["jobs"].values() for s in j["steps"])


@ALL
def test_30_02_make_targets_exist(name, scripts):
    targets, seen = make_targets(), 0
    for words in commands(scripts()):
        if words[0] != "make":
            continue
        seen += 1
        args = iter(words[1:])
        for w in args:
            if w in ("-C", "-f"):
                next(args)
            elif not w.startswith("-") and "=" not in w:
                assert w in targets, "%s: make %s: no such target in the Makefile" % (name, w)
    assert seen, "%s runs no make" % name


@ALL
def test_30_03_paths_and_programs_exist(name, scripts):
    text = "\n".join(scripts()) if name != "ci.md" else read(CI_MD)
    makefile = read(os.path.join(ROOT, "Makefile"))
    paths = re.findall(r"(?<![\w/$.-])(?:%s)?((?:build|tools|docs|scenarios|pytests|sim|plugin)"
                       r"/[\w./-]*\w)" % re.escape(CHECKOUT), text)
    assert paths or name == "Dockerfile", name
    for p in paths:
        if p.startswith("build/"):
            assert "$(B)/" + p[len("build/"):] in makefile, "%s: %s is not built" % (name, p)
        else:
            assert os.path.exists(os.path.join(ROOT, p)), "%s: %s does not exist" % (name, p)
    for link in re.findall(r"\]\(([^)#]+)\)", text):  # Markdown links, relative to docs/
        assert os.path.exists(os.path.join(ROOT, "docs", link)), "%s: link %s" % (name, link)


def _help(argv):
    p = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (argv, p.stderr)
    return p.stdout


@ALL
def test_30_04_the_cli_and_the_harness_take_the_options_given(sf_env, name, scripts):
    cli = [sys.executable, os.path.join(ROOT, "tools", "simfabric")]
    for words in commands(scripts()):
        prog = words[0][len(CHECKOUT):] if words[0].startswith(CHECKOUT) else words[0]
        if prog == "tools/simfabric":
            sub = words[1]
            assert re.search(r"\b%s\b" % sub, _help(cli)), "%s: simfabric %s" % (name, sub)
            want, have = words[2:], _help(cli + [sub])
        elif prog == "build/simfabric-harness":
            want, have = words[1:], _help([sf_env.harness])
        else:
            continue
        for w in want:
            if w.startswith("--"):
                assert re.search(r"(^|[\s\[,])%s\b" % re.escape(w.split("=")[0]), have, re.M), \
                    "%s: %s takes no %s" % (name, prog, w)


@ALL
def test_30_05_packages_are_the_ones_deps_sh_names(name, scripts):
    deps = read(os.path.join(ROOT, "tools", "scripts", "deps.sh"))
    for words in commands(scripts()):
        if words[:2] != ["apt-get", "install"]:
            continue
        for pkg in words[2:]:
            if pkg.startswith("-"):
                continue
            assert re.search(r"\b%s\b" % re.escape(pkg), deps) or pkg in EXTRA_PACKAGES, \
                "%s: apt-get install %s: deps.sh does not name it" % (name, pkg)


def test_30_06_the_readme_links_ci_md():
    assert "(docs/ci.md)" in read(os.path.join(ROOT, "README.md"))
