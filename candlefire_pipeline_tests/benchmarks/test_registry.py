"""`python -m benchmarks`: every benchmark listed with what it measures and the docs/BENCHMARKS.md
sections it writes (each section's markers exist, and every section has its writer), the
options every benchmark spells the same way, and what --quick and --no-write change."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as cli
from benchmarks import registry
from benchmarks.common import options, section
from benchmarks.common.section import Output
from benchmarks.registry import Benchmark
from candlefire_pipeline.settings import REPO_ROOT

FOUND = registry.benchmarks()
PACKAGE = REPO_ROOT / "benchmarks"
MARKERS = re.findall(r"<!-- bench:([\w-]+) -->", section.BENCHMARKS_MD.read_text())


def listed() -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--list"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}


def test_the_list_names_every_benchmark_what_it_measures_and_what_it_writes():
    lines = listed()
    assert list(lines) == list(FOUND) and len(FOUND) >= 18
    for name, benchmark in FOUND.items():
        assert benchmark.summary in lines[name]
        if benchmark.sections:
            assert lines[name].endswith(f"[writes {', '.join(benchmark.sections)}]")
        else:
            assert lines[name].endswith("[writes no section]")


@pytest.mark.parametrize("argv", [["--help"], *([name, "--help"] for name in FOUND)])
def test_help_works_and_shows_each_summary(capsys, argv):
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert done.value.code == 0
    for name in FOUND if len(argv) == 1 else argv[:1]:
        assert " ".join(FOUND[name].summary.split()[:4]) in shown, name


@pytest.mark.parametrize("name", list(FOUND))
def test_each_section_a_benchmark_writes_has_its_markers(name):
    text = section.BENCHMARKS_MD.read_text()
    for written in FOUND[name].sections:
        assert text.count(f"<!-- bench:{written} -->") == 1, written
        assert text.count(f"<!-- /bench:{written} -->") == 1, written


def test_every_section_of_the_document_has_exactly_one_writer():
    writers = [s for benchmark in FOUND.values() for s in benchmark.sections]
    assert sorted(writers) == sorted(MARKERS)  # no orphan section, none written twice


@pytest.mark.parametrize("name", list(FOUND))
def test_each_benchmark_runs_a_function_that_exists(name):
    assert callable(FOUND[name].runner())


def test_a_name_declared_twice_is_refused(monkeypatch):
    twice = Benchmark("load", "again", ("load",), "benchmarks.load.bulk:run")
    module = sys.modules["benchmarks.embedding.benchmark"]
    monkeypatch.setattr(module, "BENCHMARKS", (*module.BENCHMARKS, twice))
    with pytest.raises(ValueError, match="'load' is declared twice"):
        registry.benchmarks()


def test_every_topic_is_a_package_that_names_its_entry():
    """benchmarks/ holds the runner, the registry, `common` and one package per topic."""
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "registry.py"]
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert packages == sorted([*registry.TOPICS, "common"])
    for folder in [PACKAGE / topic for topic in registry.TOPICS] + [PACKAGE / "common"]:
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        entry = doc.split("Entry: `", 1)[-1].split("`", 1)[0] if "Entry: `" in doc else ""
        assert (folder / f"{entry}.py").is_file(), f"{folder.name}: no entry module in {doc!r}"


# -- the runner: options, --quick, --no-write ------------------------------------------------

RAN: list = []


def record(args, out) -> None:
    """The run function of the test benchmark: what the runner handed it."""
    RAN.append((args, out))
    out.section("probe", f"size {args.size}")


def probe_options(parser) -> None:
    from benchmarks.common import options

    options.size(parser, 1_000, quick=10)
    options.repeats(parser, 3)


PROBE = Benchmark("probe", "a test benchmark", ("probe",), f"{__name__}:record", probe_options)


@pytest.fixture
def probe(monkeypatch, tmp_path) -> Path:
    target = tmp_path / "BENCHMARKS.md"
    monkeypatch.setattr(registry, "benchmarks", lambda: {"probe": PROBE})
    monkeypatch.setattr(section, "BENCHMARKS_MD", target)
    RAN.clear()
    return target


@pytest.mark.parametrize(
    ("argv", "size", "repeats", "written"),
    [
        ([], 1_000, 3, True),
        (["--quick"], 10, 3, False),  # the quick value; an option without one keeps its own
        (["--quick", "--size", "77"], 77, 3, False),  # given on the command line: it wins
        (["--no-write", "--repeats", "5"], 1_000, 5, False),
    ],
)
def test_options_take_their_full_or_quick_value_and_only_a_full_run_writes(
    probe, capsys, argv, size, repeats, written
):
    assert cli.main(["probe", *argv]) == 0
    ((args, out),) = RAN
    assert (args.size, args.repeats, out.writes) == (size, repeats, written)
    assert f"size {size}" in capsys.readouterr().out  # printed either way
    assert probe.exists() == written
    if written:
        assert f"<!-- bench:probe -->\nsize {size}" in probe.read_text()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["probe", "--size", "0"], "0 is not a positive number"),
        (["probe", "--size", "many"], "'many' is not a whole number"),
        (["probe", "--sizes", "1"], "unrecognized arguments"),
        (["nosuch"], "invalid choice: 'nosuch'"),
        ([], "name a benchmark"),
    ],
)
def test_bad_input_is_refused_with_what_was_wrong(probe, capsys, argv, said):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2 and said in capsys.readouterr().err
    assert RAN == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["scale", "--sizes", "62196,x"], "'x' is not a whole number"),
        (["scale", "--efforts", "200:0"], "'200:0' is not semantic:entities"),
        (["retrieval", "--parts", "quality,speed"], "unknown speed: choose from quality"),
        (["shadow", "--scenarios", "8:lazy"], "priority one of idle, nice, normal"),
        (["shadow", "--scenarios", "8:idle:qdrant"], "served store one of pgvector, chroma"),
        (["churn", "--share", "1.5"], "1.5 is more than all the papers"),
        (["generations", "--new", "halfvec,fp16"], "unknown fp16: choose from halfvec, int8"),
        (["app", "--threads", "-1"], "-1 is not a positive number"),
        (["unretire", "--passed-over", "0"], "0 is not a positive number"),
    ],
)
def test_each_benchmarks_own_options_refuse_bad_input(capsys, argv, said):
    with pytest.raises(SystemExit):
        cli.main(argv)
    assert said in capsys.readouterr().err


def test_a_section_the_benchmark_does_not_declare_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(section, "BENCHMARKS_MD", tmp_path / "BENCHMARKS.md")
    out = Output("probe", ("probe",), writes=True)
    with pytest.raises(ValueError, match="'probe' writes the sections probe, not 'load'"):
        out.section("load", "figures")
    with pytest.raises(ValueError, match="writes the sections none, not 'load'"):
        Output("quiet", (), writes=True).write("load", "figures")
    assert not (tmp_path / "BENCHMARKS.md").exists()


def test_the_generations_the_options_offer_are_the_ones_it_builds():
    from benchmarks.generations import benchmark, beside

    assert tuple(beside.NEW) == benchmark.NEW_GENERATIONS


def resolved(argv: list[str]) -> dict:
    args = cli.build_parser(FOUND).parse_args(argv)
    return vars(options.resolve(args))


#: Benchmarks whose only input is the shared data as it is: --quick changes nothing but writing.
NOTHING_TO_SHRINK = {"scale-inputs"}


@pytest.mark.parametrize("name", list(FOUND))
def test_quick_shrinks_every_benchmark_that_has_a_size(name):
    full, quick = resolved([name]), resolved([name, "--quick"])
    assert not [k for k, v in {**full, **quick}.items() if isinstance(v, options.Default)]
    shrunk = {k for k in full if k != "quick" and full[k] != quick[k]}
    assert bool(shrunk) == (name not in NOTHING_TO_SHRINK), shrunk
