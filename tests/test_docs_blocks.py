"""Every ``python`` block of the README and ``docs/`` runs as written.

Each page's blocks run top to bottom in one fresh namespace, in a process of their own per
page, forked from a runner that has imported TensorFlow, TFP and the library and run nothing
else (so pages share nothing with each other or with this test process, and none pays the
import again), with the working directory a temporary folder (files a block writes land
there) and a timeout per page.
A failure names the page, the line of the block and the error; tracebacks point at the
page's own lines.

A page changes how one block runs with an HTML comment on the line(s) just above the
block's opening fence (the convention is documented in ``docs/contributing.md``):

* ``<!-- block: standalone -->``: the block runs alone, in its own process and namespace,
  not after the page's other blocks (and they do not see its names);
* ``<!-- block: not run: <reason> -->``: the block is not run; the reason, which the page's
  prose also tells the reader, is reported with the test.

The tuning and sampling examples (the pages in ``UNFLAGGED_PAGES``) show no warning of the
library about their own results (a tuner's pick that is "not a choice", a pick or a run whose
minibatch noise "inflates the posterior variance", a best arm that diverged): an example picks
settings the library does not flag. Such a page may show the warning on purpose only where its
text explains it: it is then listed in ``WARNINGS_EXPLAINED`` with the sentence of the page
that does.

A block that needs the reader's data does not get a hidden fixture here: the page defines a
small stand-in, visibly, in a block of its own or at the top of the block.

Blocks run as after the README's install (`pip install tfp-sgmcmc`, no extra), even though
this test process has every extra: the modules of the optional extras (ArviZ, scikit-learn,
Ray, pytest) cannot be imported by a block unless the block names the extra next to it, in
its code or in the three lines above its fence, as a pip command does:
``pip install "tfp-sgmcmc[arviz]"`` or ``pip install -e ".[models]"``. A block that calls
``to_arviz()`` without saying so fails here as it fails for the reader.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Per page: the most seconds its blocks may take together (the slowest page takes about 55 s
# on a loaded 2-core machine; TensorFlow's import is paid once, by the runner). It only
# ends a hung page, so it leaves room for a machine several times slower.
PAGE_TIMEOUT_S = 600

# Pages whose examples do not run yet, with what fails (strict: a page that starts to pass
# must lose its mark). Keep this empty whenever possible.
KNOWN_FAILURES: dict[str, str] = {}

#: Pages whose examples are real runs of 15-80 s on a 2-core machine (MAMBA tunings, long
#: driver runs, Keras fits): they run in the slow tier (``pytest -m slow``), which runs every
#: page, so CI keeps its time budget. The README and the cheaper pages run in CI; the
#: library calls these pages make are each tested in CI by the tests named here.
SLOW_PAGES: dict[str, str] = {
    "docs/entry_points.md": "tests/test_sample_posterior.py, tests/test_bayesian_model.py, "
    "tests/tuning/test_mamba.py",
    "docs/keras.md": "tests/test_bayesian_model.py, tests/test_keras_arguments.py, "
    "tests/tuning/test_keras.py, tests/test_bayesian_model_tune.py",
    "docs/tuning.md": "tests/tuning/",
    "docs/driver.md": "tests/test_driver.py, tests/test_flat_chain.py, tests/test_one_loop.py",
    "docs/scale_out.md": "tests/estimators/test_distributed.py, tests/tuning/test_executors.py",
    "docs/sample_posterior.md": "tests/test_sample_posterior*.py, "
    "tests/test_real_posteriors_sklearn.py",
    "docs/diagnostics.md": "tests/diagnostics/",
    "docs/models.md": "tests/test_models.py, tests/test_pmf_bnn_models.py",
}

#: The library's warnings about its own results (a tuner's pick, a run's gradient noise),
#: found in what a page's blocks print or warn.
FLAGGED_RESULT = re.compile(
    r"not a choice|inflates the posterior variance|MAMBA's best arm:|best arm's chain diverged"
)
#: Pages whose examples must not print FLAGGED_RESULT: MAMBA's and the driver's examples.
UNFLAGGED_PAGES = (
    "docs/driver.md",
    "docs/entry_points.md",
    "docs/keras.md",
    "docs/scale_out.md",
    "docs/tuning.md",
)
#: Of those, pages that may show such a warning, each with the sentence of the page that
#: explains it.
WARNINGS_EXPLAINED: dict[str, str] = {
    # Batches of half the rows put the pick near the gradient-noise check's threshold: one
    # run's pick passes it, another's (other weights from `fit`) warns of a 1.1-1.2 inflation.
    "docs/keras.md": "may warn of an inflation of the posterior variance by up to about 1.2",
}


def flagged_results(output: str) -> list[str]:
    """The lines of a page's output where the library flags its own result."""
    return [ln.strip() for ln in output.splitlines() if FLAGGED_RESULT.search(ln)]

#: The optional extras (pyproject.toml) and the top-level modules each one adds.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "arviz": ("arviz",),
    "models": ("sklearn",),
    "ray": ("ray",),
    "test": ("pytest", "hypothesis", "arviz", "sklearn", "ray"),
}
#: An extra named in a pip command: ``tfp-sgmcmc[arviz]``, ``.[models]``, ``.[arviz,ray]``.
_EXTRA_NAMED = re.compile(r"(?:tfp-sgmcmc|\.)\[(?P<extras>[a-z]+(?:\s*,\s*[a-z]+)*)\]")
#: Lines above a block's fence searched for a named extra.
EXTRA_CONTEXT_LINES = 3


def named_extras(text: str) -> tuple[str, ...]:
    """The extras that pip commands in ``text`` name, sorted."""
    found = set()
    for m in _EXTRA_NAMED.finditer(text):
        found.update(e.strip() for e in m.group("extras").split(","))
    return tuple(sorted(found & EXTRA_MODULES.keys()))


def hidden_modules(extras: tuple[str, ...]) -> list[str]:
    """The optional modules a block that names ``extras`` may not import."""
    allowed = {m for e in extras for m in EXTRA_MODULES[e]}
    return sorted({m for mods in EXTRA_MODULES.values() for m in mods} - allowed)


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_MARK = re.compile(r"^\s*<!--\s*block:\s*(?P<body>.*?)\s*-->\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository root
    line: int  # 1-based line of the first code line (after the opening fence)
    code: str
    mode: str = "run"  # "run", "standalone" or "skip"
    reason: str = ""
    extras: tuple[str, ...] = ()  # the extras named in the block or just above it


def _parse_mark(body: str, where: str) -> tuple[str, str]:
    if body == "standalone":
        return "standalone", ""
    m = re.fullmatch(r"not run:\s*(?P<reason>\S.*)", body)
    if m:
        return "skip", m.group("reason")
    raise ValueError(
        f"{where}: unknown block mark {body!r} (expected 'standalone' or 'not run: <reason>')"
    )


def page_blocks(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[Block]:
    """The fenced ``python`` blocks of a Markdown page, with their marks."""
    rel = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: tuple[str, str, int] | None = None  # a mark waiting for its block
    i = 0
    while i < len(lines):
        line = lines[i]
        mark = _MARK.match(line)
        if mark:
            if pending is not None:
                raise ValueError(f"{rel}:{pending[2]}: block mark not followed by a python block")
            pending = (*_parse_mark(mark.group("body"), f"{rel}:{i + 1}"), i + 1)
            i += 1
            continue
        fence = _FENCE.match(line)
        if not fence:
            if pending is not None and line.strip() and not line.strip().startswith("<!--"):
                raise ValueError(f"{rel}:{pending[2]}: block mark not followed by a python block")
            i += 1
            continue
        ticks = fence.group("fence")
        info = fence.group("info").strip().split()
        lang = info[0].lower() if info else ""
        j = i + 1
        body: list[str] = []
        closing = re.compile(rf"{re.escape(ticks[0])}{{{len(ticks)},}}")
        while j < len(lines) and not closing.fullmatch(lines[j].strip()):
            body.append(lines[j])
            j += 1
        if lang in ("python", "py"):
            code = textwrap.dedent("\n".join(body)) + "\n"
            mode, reason = ("run", "") if pending is None else pending[:2]
            above = "\n".join(lines[max(0, i - EXTRA_CONTEXT_LINES) : i])
            extras = named_extras(above + "\n" + code)
            blocks.append(Block(rel, i + 2, code, mode, reason, extras))
        elif pending is not None:
            raise ValueError(f"{rel}:{pending[2]}: block mark above a {lang or 'plain'} block")
        pending = None
        i = j + 1
    if pending is not None:
        raise ValueError(f"{rel}:{pending[2]}: block mark not followed by a python block")
    return blocks


# The block runner, a Python process of its own ("zygote"): it imports TensorFlow, TFP and
# the library once, then for each page forks a child that runs the page's blocks in order in
# one fresh namespace, with its output in files. Every page thus starts from the same state
# (modules imported, TensorFlow's runtime not yet started, no names defined) without paying
# the import per page. Each block is compiled under the page's absolute path, shifted to its
# line, so a traceback shows the page's own line. One request per stdin line (JSON), one
# reply per stdout line.
_RUNNER = r"""
import atexit, json, os, signal, sys, time, traceback

class HideExtras:
    # A meta-path finder: the optional extras' modules that the running block did not name
    # cannot be imported, as after an install without that extra.
    hidden = frozenset()

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.hidden:
            raise ModuleNotFoundError(
                f"No module named {name!r} (an optional extra's module: name the extra next to "
                "the block, e.g. pip install \"tfp-sgmcmc[arviz]\")", name=name)
        return None

HIDE = HideExtras()

def hide(modules):
    HIDE.hidden = frozenset(modules)
    for name in list(sys.modules):  # imported earlier (TensorFlow imports scikit-learn)
        if name.partition(".")[0] in HIDE.hidden:
            del sys.modules[name]

def run_blocks(blocks):
    scope = {"__name__": "__main__", "__builtins__": __builtins__}
    sys.meta_path.insert(0, HIDE)
    for b in blocks:
        hide(b["hidden"])
        print(f"@@block {b['page']}:{b['line']}", flush=True)
        code = "\n" * (b["line"] - 1) + b["code"]
        try:
            exec(compile(code, b["path"], "exec"), scope)
        except BaseException:
            print(f"@@failed {b['page']}:{b['line']}", flush=True)
            traceback.print_exc()
            return 1
    print("@@done", flush=True)
    return 0

import numpy, tensorflow, tensorflow_probability, tfp_sgmcmc  # noqa: E401,F401
reply = sys.stdout
for request in sys.stdin:
    req = json.loads(request)
    pid = os.fork()
    if pid == 0:  # the child: its own process group, so a timeout ends what it started
        os.setpgid(0, 0)
        atexit._clear()  # the zygote's exit handlers are not the page's
        code = 1
        try:
            os.chdir(req["cwd"])
            files = ((0, os.devnull, "r"), (1, req["out"], "w"), (2, req["err"], "w"))
            for fd, name, mode in files:
                with open(name, mode) as f:
                    os.dup2(f.fileno(), fd)
            sys.stdin = open(os.devnull)
            code = run_blocks(req["blocks"])
        finally:
            atexit._run_exitfuncs()  # what the page registered (e.g. ray.shutdown)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + req["timeout"]
    status, timed_out = None, False
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() > deadline:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            status = os.waitpid(pid, 0)[1]
        else:
            time.sleep(0.05)
    try:  # what the page started in its process group (e.g. a Ray worker) ends with it
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "timed_out": timed_out}),
          file=reply, flush=True)
"""


class _Runner:
    """The zygote process and the requests sent to it (one page at a time)."""

    def __init__(self, log: pathlib.Path) -> None:
        self.log = log
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["MPLBACKEND"] = "Agg"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _RUNNER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),  # its own start-up messages, shown if it dies
            text=True,
            env=env,
            cwd=ROOT,
        )

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def run(self, blocks: list[Block], cwd: pathlib.Path, timeout: float) -> str:
        """Runs ``blocks`` in order in one namespace; fails naming the block that failed.
        Returns what they printed and warned (stdout, then stderr)."""
        out, err = cwd / "_stdout.txt", cwd / "_stderr.txt"
        request = {
            "blocks": [
                {
                    "page": b.page,
                    "line": b.line,
                    "code": b.code,
                    "path": str(ROOT / b.page),
                    "hidden": hidden_modules(b.extras),
                }
                for b in blocks
            ],
            "cwd": str(cwd),
            "out": str(out),
            "err": str(err),
            "timeout": timeout,
        }
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            log = self.log.read_text(errors="replace")[-3000:]
            pytest.fail(f"the block runner died (exit {self.proc.poll()}):\n{log}", pytrace=False)
        reply = json.loads(line)
        stdout = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        stderr = err.read_text(encoding="utf-8", errors="replace") if err.exists() else ""
        started = re.findall(r"^@@block (\S+)$", stdout, flags=re.M)
        where = started[-1] if started else f"{blocks[0].page} (before its first block)"
        if reply["timed_out"]:
            pytest.fail(
                f"block at {where} was still running after the page's {timeout:.0f} s",
                pytrace=False,
            )
        if reply["rc"] != 0 or "@@done" not in stdout:
            lines = stderr.strip().splitlines()
            # The traceback's tail: the page's lines and the error, not TensorFlow's logs.
            tb = max((k for k, ln in enumerate(lines) if ln.startswith("Traceback")), default=0)
            tail = [ln for ln in lines[tb:] if 'File "<string>"' not in ln][-40:]
            pytest.fail(
                f"block at {where} failed (exit {reply['rc']}):\n" + "\n".join(tail),
                pytrace=False,
            )
        return stdout + "\n" + stderr


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    r = _Runner(tmp_path_factory.mktemp("docs_blocks") / "runner.log")
    yield r
    r.close()


def _page_params():
    params = []
    for path in PAGES:
        rel = path.relative_to(ROOT).as_posix()
        try:
            blocks = page_blocks(path)
        except ValueError:
            blocks = [Block(rel, 0, "")]  # reported by test_block_marks_are_well_formed
        if not blocks:
            continue
        marks = []
        if rel in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[rel]))
        if rel in SLOW_PAGES:
            marks.append(pytest.mark.slow)
        params.append(pytest.param(rel, id=rel, marks=marks))
    return params


def test_block_marks_are_well_formed():
    problems = []
    for path in PAGES:
        try:
            page_blocks(path)
        except ValueError as exc:
            problems.append(str(exc))
    assert not problems, "\n".join(problems)


#: What in a block's code needs an extra: (pattern, extra).
EXTRA_USES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bto_arviz\(|^\s*(?:import|from) arviz\b", re.M), "arviz"),
    (re.compile(r"^\s*(?:import|from) sklearn\b|\bbnn_digits\b", re.M), "models"),
    (re.compile(r"^\s*(?:import|from) ray\b|\bRayExecutor\b", re.M), "ray"),
)


def missing_extras(block: Block) -> list[str]:
    """The extras that ``block``'s code needs and that it does not name."""
    code = re.sub(r"#.*", "", block.code)  # an alternative named in a comment is not a use
    need = {extra for rx, extra in EXTRA_USES if rx.search(code)}
    if "test" in block.extras:
        return []
    return sorted(need - set(block.extras))


def test_blocks_that_need_an_extra_name_it():
    """A reader who installed only what the README installs learns, next to the block,
    which extra it needs (the run below enforces it; this names every offender at once,
    including blocks that are not run)."""
    problems = []
    for path in PAGES:
        for b in page_blocks(path):
            for extra in missing_extras(b):
                problems.append(
                    f"{b.page}:{b.line}: needs the {extra!r} extra; say so next to the block, "
                    f'e.g. a comment: # needs pip install "tfp-sgmcmc[{extra}]"'
                )
    assert not problems, "\n".join(problems)


def test_extras_named_here_are_the_packages_extras():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert set(EXTRA_MODULES) <= set(extras)
    assert any(r.startswith("arviz") for r in extras["arviz"])
    assert any(r.startswith("scikit-learn") for r in extras["models"])
    assert any(r.startswith("ray") for r in extras["ray"])


def test_extras_are_read_next_to_the_block_and_enforced(tmp_path, runner):
    page = tmp_path / "probe"
    page.write_text(
        "# t\n\n```python\nidata = res.to_arviz()\n```\n\n"
        'With ArviZ (`pip install "tfp-sgmcmc[arviz]"`):\n\n```python\nimport arviz\n```\n\n'
        '```python\nimport sklearn  # pip install -e ".[models,ray]"\n```\n',
        encoding="utf-8",
    )
    blocks = page_blocks(page, root=tmp_path)
    assert [b.extras for b in blocks] == [(), ("arviz",), ("models", "ray")]
    assert [missing_extras(b) for b in blocks] == [["arviz"], [], []]
    assert hidden_modules(("arviz",)) == ["hypothesis", "pytest", "ray", "sklearn"]
    # The runner hides an optional module from a block that does not name its extra, even
    # when this process has it installed (and TensorFlow imported it already) ...
    pytest.importorskip("sklearn")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)block at probe:3 failed.*sklearn"):
        runner.run([Block("probe", 3, "import sklearn\n")], tmp_path, 60)
    # ... and lets a block that names it import it.
    runner.run([Block("probe", 3, "import sklearn\n", extras=("models",))], tmp_path, 60)


def test_the_parser_and_runner_name_the_block(tmp_path, runner):
    page = tmp_path / "probe"
    text = (
        "# t\n\n```python\na = 1\n```\n\n<!-- block: standalone -->\n```python\nb = 2\n```\n"
        "\n<!-- block: not run: needs a Ray cluster -->\n```python\nc = 3\n```\n"
        "\n- item\n\n    ```python\n    d = a\n    ```\n\n```bash\necho\n```\n"
    )
    page.write_text(text, encoding="utf-8")
    blocks = page_blocks(page, root=tmp_path)
    got = [(b.line, b.code, b.mode, b.reason) for b in blocks]
    assert got == [
        (4, "a = 1\n", "run", ""),
        (9, "b = 2\n", "standalone", ""),
        (14, "c = 3\n", "skip", "needs a Ray cluster"),
        (20, "d = a\n", "run", ""),
    ]
    # A mark of another kind, or one above no python block, is an error.
    page.write_text("<!-- block: skip -->\n```python\na = 1\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown block mark"):
        page_blocks(page, root=tmp_path)
    page.write_text("<!-- block: standalone -->\n```bash\necho\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="above a bash block"):
        page_blocks(page, root=tmp_path)
    # A failing block is named by its page and line.
    with pytest.raises(pytest.fail.Exception, match=r"block at probe:3 failed"):
        runner.run([Block("probe", 3, "x = undefined_name\n")], tmp_path, 60)
    # So is one still running at the page's timeout.
    with pytest.raises(pytest.fail.Exception, match=r"block at probe:7 was still running"):
        runner.run([Block("probe", 7, "import time\ntime.sleep(60)\n")], tmp_path, 1)


@pytest.mark.subprocess
@pytest.mark.parametrize("page", _page_params())
def test_page_blocks_run_as_written(page, tmp_path, runner):
    blocks = page_blocks(ROOT / page)
    in_order = [b for b in blocks if b.mode == "run"]
    alone = [b for b in blocks if b.mode == "standalone"]
    skipped = [b for b in blocks if b.mode == "skip"]
    output = ""
    if in_order:
        output += runner.run(in_order, tmp_path, PAGE_TIMEOUT_S)
    for b in alone:
        (tmp_path / f"alone_{b.line}").mkdir()
        output += runner.run([b], tmp_path / f"alone_{b.line}", PAGE_TIMEOUT_S)
    flagged = flagged_results(output)
    if page in WARNINGS_EXPLAINED:
        assert WARNINGS_EXPLAINED[page] in (ROOT / page).read_text(encoding="utf-8")
    elif flagged and page in UNFLAGGED_PAGES:
        pytest.fail(
            f"{page}: the examples' results are flagged by the library (pick settings it "
            "does not flag, or explain the warning in the page's text and list it in "
            "WARNINGS_EXPLAINED):\n" + "\n".join(flagged[:10]),
            pytrace=False,
        )
    if skipped and not (in_order or alone):
        pytest.skip("; ".join(f"{b.page}:{b.line} not run: {b.reason}" for b in skipped))
    for b in skipped:
        print(f"{b.page}:{b.line} not run: {b.reason}")


def test_flagged_results_are_found_in_a_pages_output():
    """The detector finds the library's warnings about a pick (the phrases of
    `warn_if_no_usable_arm`, the gradient-noise check and a diverged best arm), and not a
    table's note on a pruned arm or a noise check that passed."""
    from tfp_sgmcmc.diagnostics import GradientNoiseReport

    noisy = GradientNoiseReport("SGLD", [], 1.23, 1.12, 0.1, 64).message()
    quiet = GradientNoiseReport("SGLD", [], 0.01, 0.01, 0.1, 64).message()
    out = "\n".join([
        "| 1e-07 | inf | far from the posterior (...) |",
        f"docs/tuning.md:3: RuntimeWarning: MAMBA's best arm: {noisy}",
        "MAMBA: no arm ... Best arm #0 is the first in grid order, not a choice. Change",
        quiet,
    ])
    assert len(flagged_results(out)) == 2
    assert flagged_results(noisy) and not flagged_results(quiet)
    assert all((ROOT / page).is_file() for page in UNFLAGGED_PAGES)
