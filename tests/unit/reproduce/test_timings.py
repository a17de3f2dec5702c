"""What a batch run records of its time, what `papa reproduce` says to expect from a reference run, and the
measurements page generated from the committed reference."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO
from papa.core.errors import IncompatibleArtifactError, InputError
from papa.core.run_folder import RunFolder
from papa.reproduce import timings
from papa.reproduce.batch import Batch
from papa.reproduce.jobs import done_runs
from papa.reproduce.timings import (Expected, measurements_block, notebook_time, plan_text, read_notebook_times,
                                    read_run, record_notebook_time, record_run, reference)


def _row(name: str, seconds: float, **extra) -> dict:
    return {"notebook": name, "profile": "cpu", "seconds": seconds, "output": f"{name}.ipynb", **extra}


def test_notebook_times_keep_earlier_notebooks_and_replace_a_rerun(tmp_path):
    """A batch that resumes (or runs other notebooks) keeps the times of the ones done before, in section order."""
    record_notebook_time(RunFolder.at(tmp_path), _row("04_alternative_matrices", 30.0, new_runs=12))
    record_notebook_time(RunFolder.at(tmp_path), _row("01_method", 1.0, new_runs=4))
    times = record_notebook_time(RunFolder.at(tmp_path), _row("04_alternative_matrices", 40.0, new_runs=0))
    stored = pd.read_csv(tmp_path / "notebook_times.csv")
    assert list(stored["notebook"]) == ["01_method", "04_alternative_matrices"] == list(times["notebook"])
    assert list(stored["seconds"]) == [1.0, 40.0] and stored["new_runs"].tolist()[1] == 0
    (tmp_path / "notebook_times.csv").write_text("name,secs\nx,1\n")
    with pytest.raises(InputError, match="lacks the columns"):
        record_notebook_time(RunFolder.at(tmp_path), _row("01_method", 1.0, new_runs=0))
    with pytest.raises(ValueError, match="has the fields"):
        record_notebook_time(RunFolder.at(tmp_path), _row("01_method", 1.0))  # how many runs it computed is always recorded


def test_times_without_new_runs_are_refused(tmp_path):
    (tmp_path / "notebook_times.csv").write_text("notebook,profile,seconds,output\n01_method,cpu,43.1,x.ipynb\n")
    with pytest.raises(InputError, match=r"lacks the columns \['new_runs'\]"):
        record_notebook_time(RunFolder.at(tmp_path), _row("02_main_results", 5.0, new_runs=3))
    assert read_notebook_times(REPO / "artifacts" / "cpu" / "notebook_times.csv")["seconds"].gt(0).all()


def test_the_notebooks_time_is_one_sentence_of_the_recorded_rows(tmp_path):
    record_notebook_time(RunFolder.at(tmp_path), _row("01_method", 43.1, new_runs=3))
    record_notebook_time(RunFolder.at(tmp_path), _row("02_main_results", 23.6, new_runs=1500))
    text = notebook_time(RunFolder.at(tmp_path))
    assert "records 67 s of notebook execution" in text and "(01 43 s, 02 24 s; 1,503 probe runs computed)" in text
    record_notebook_time(RunFolder.at(tmp_path), _row("01_method", 43.1, new_runs=0))
    record_notebook_time(RunFolder.at(tmp_path), _row("02_main_results", 23.6, new_runs=0))
    assert notebook_time(RunFolder.at(tmp_path)).endswith("(01 43 s, 02 24 s; every probe run cached).")


def test_the_notebooks_time_refuses_a_file_from_before_new_runs(tmp_path):
    """A ``notebook_times.csv`` written before the runs each notebook computed were recorded is refused by the one
    format check (`read_notebook_times`), not read without them."""
    (tmp_path / "notebook_times.csv").write_text("notebook,profile,seconds,output\n01_method,cpu,43.1,x.ipynb\n")
    with pytest.raises(InputError, match=r"lacks the columns \['new_runs'\]; move it aside"):
        notebook_time(RunFolder.at(tmp_path))


def _reference(folder, *, profile="quick", started_empty=True, seconds=None):
    seconds = seconds or {"01_method": 10.0, "02_main_results": 40.0, "08_decoders": 70.0}
    folder.mkdir(parents=True)
    for name, s in seconds.items():
        record_notebook_time(RunFolder.at(folder), {"notebook": name, "profile": profile, "seconds": s, "output": "x",
                                      "new_runs": 1})
    record_run(RunFolder.at(folder), profile=profile, names=list(seconds), seconds=sum(seconds.values()) + 12,
               started_empty=started_empty, device="cpu", command="papa reproduce --profile quick", phases={})
    return folder


def test_a_run_record_is_validated_when_read(tmp_path):
    record = record_run(RunFolder.at(tmp_path), profile="quick", names=["01_method"], seconds=3.21, started_empty=True,
                        device="cpu", command="papa reproduce", phases={})
    assert read_run(tmp_path / "reproduction.json") == record and record["seconds"] == 3.2
    (tmp_path / "reproduction.json").write_text(json.dumps({"format": 2, "profile": "quick"}))
    with pytest.raises(InputError, match="is not a papa run record .it lacks command, device"):
        read_run(tmp_path / "reproduction.json")
    (tmp_path / "reproduction.json").write_text(json.dumps({**record, "format": "papa.reproduction/1"}))
    with pytest.raises(IncompatibleArtifactError, match="run record that is in artifact format 'papa.reproduction/1'"):
        read_run(tmp_path / "reproduction.json")
    (tmp_path / "reproduction.json").write_text("{")
    with pytest.raises(InputError, match="cannot read the run record"):
        read_run(tmp_path / "reproduction.json")


def test_the_plan_quotes_the_reference_and_what_is_already_done(tmp_path):
    expected = reference("quick", _reference(tmp_path / "timings" / "quick").parent)
    assert isinstance(expected, Expected) and expected.total == 132.0
    names = ["01_method", "02_main_results", "08_decoders"]
    plan = plan_text("quick", names, "out", expected)
    assert "01_method                  about 10 s" in plan and "08_decoders                about 70 s" in plan
    assert "in all                     about 2 min 00 s of notebooks (the whole reference batch took 2 min 12 s" in plan
    assert expected.notebooks_seconds(["01_method", "08_decoders"]) == 80.0
    assert "whole reference batch" not in plan_text("quick", names[:2], "out", expected)  # a part of it: no total
    resumed = plan_text("quick", names, "out", expected, {"02_main_results": (30, 40), "08_decoders": (0, 10)})
    assert "02_main_results            about 10 s  (30 of 40 probe runs already done here)" in resumed
    assert "about 1 min 30 s of notebooks" in resumed
    assert "03_constant_patterns       not in the reference run" in plan_text("quick", ["03_constant_patterns"],
                                                                             "out", expected)
    unknown = plan_text("cpu", names, "out", None)
    assert "No reference run of profile cpu is on record" in " ".join(unknown.split())
    assert unknown.splitlines()[-3:] == [f"  {name}" for name in names]  # still says what it will run
    assert reference("cpu", tmp_path / "timings") is None


def test_a_reference_must_have_started_from_an_empty_folder(tmp_path):
    _reference(tmp_path / "quick", started_empty=False)
    with pytest.raises(InputError, match="not a reference run of profile 'quick' from an empty output folder"):
        reference("quick", tmp_path)


def test_nothing_is_listed_for_a_folder_without_results(tmp_path):
    assert done_runs(Batch("quick", ["02_main_results"], out_dir=tmp_path)) == {}


def test_the_committed_quick_reference_and_the_page_generated_from_it():
    expected = reference("quick")
    assert expected is not None, "artifacts/timings/quick/ holds the reference run of `make reproduce`"
    assert list(expected.seconds) == list(timings.NOTEBOOKS)  # every notebook, from an empty folder
    page = (REPO / "docs" / "measurements.md").read_text(encoding="utf-8")
    begin, end = "<!-- quick-run: begin -->", "<!-- quick-run: end -->"
    block = page.split(begin, 1)[1].split(end, 1)[0].strip()
    assert block == measurements_block(expected), "regenerate it: python docs/gen_measurements.py"


def test_the_quick_reference_ran_the_grids_the_notebooks_declare_now(tmp_path):
    """The up-front estimate is the reference's: when a notebook's quick grid grows or shrinks (a profile size, a
    fraction, a task), the reference's runs per notebook no longer match and this fails until the reference is
    made again (`make reproduce` from an empty artifacts/quick, its two files copied to artifacts/timings/quick)."""
    from papa.reproduce.jobs import notebook_jobs

    recorded = read_notebook_times(RunFolder(timings.REFERENCE_DIR / "quick").notebook_times)
    listed, declared = set(), {}
    for name in timings.NOTEBOOKS:  # each notebook computes the runs no earlier notebook did
        keys = {job.key for job in notebook_jobs("quick", [name], folder=tmp_path)}
        declared[name] = len(keys - listed)
        listed |= keys
    assert declared == dict(zip(recorded["notebook"], recorded["new_runs"].astype(int)))


def test_the_generator_rewrites_the_block(tmp_path):
    page = tmp_path / "measurements.md"
    page.write_text("# M\n\n<!-- quick-run: begin -->\nold\n<!-- quick-run: end -->\n\nafter\n")
    refs = _reference(tmp_path / "timings" / "quick").parent
    import runpy

    gen = runpy.run_path(str(REPO / "docs" / "gen_measurements.py"), run_name="not_main")
    gen["update"](page, refs)
    text = page.read_text()
    assert "\nold\n" not in text and "| 08_decoders | 70.0 |" in text and text.endswith("after\n")
    shutil.rmtree(refs)


def test_a_run_record_says_where_the_time_went(tmp_path):
    phases = {"extraction": 10.0, "features": 30.0, "probe training": 20.0}
    record = record_run(RunFolder.at(tmp_path), profile="quick", names=["01_method"], seconds=100.0, started_empty=True,
                        device="cpu", command="papa reproduce", phases=phases)
    assert set(record["phases"]) == set(timings.RUN_PHASES) and record["phases"]["lambda"] == 0.0
    text = timings.phases_text(read_run(tmp_path / "reproduction.json"))
    assert "features" in text and "30.0%" in text and "40.0 s   40.0%" in text  # the notebooks' rest: 100 - 60


@pytest.mark.slow  # reads the committed runs and renders every generated block
def test_every_generated_block_of_the_docs_is_current():
    """The docs' measured blocks and claim pages are generated from the committed runs (docs/gen_measurements.py):
    the README's results, docs/results.md's claim by claim, docs/decoders.md's claim lines and tables included."""
    from docs import gen_measurements

    assert gen_measurements.stale_blocks() == [], "regenerate them: python -m docs.gen_measurements"


def test_an_edited_claim_number_makes_its_page_stale(tmp_path):
    """A number of a claim typed over in the docs is caught: the page no longer says what the stored run reads."""
    import re

    from docs import gen_measurements as gen

    for name in ("claims", "claims-brief", "decoder-claims"):
        page, block = gen.BLOCKS[name]
        text = page.read_text(encoding="utf-8")
        begin, end = gen.markers(name)
        body = text.split(begin, 1)[1].split(end, 1)[0]
        edited = re.sub(r"\d\.(\d)", lambda m: m.group(0)[:-1] + str((int(m.group(1)) + 1) % 10), body, count=1)
        assert edited != body
        copy = tmp_path / page.name
        copy.write_text(text.replace(body, edited), encoding="utf-8")
        assert gen.stale_blocks({name: (copy, block)}) == [f"{page.name}: {name}"]


def _stored_verdicts(notebook: Path) -> list[str]:
    """Each claim's verdict, and its decoders' line's, as a stored notebook's claims cell printed them
    (`papa.paper.claims.format_claims`), e.g. "Fig. 5 inconclusive", "decoders does not hold"."""
    import json
    import re

    from papa.paper.claims import VERDICTS

    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(o.get("text", "")) for c in cells if c["cell_type"] == "code"
                   and "section.claims.text(" in "".join(c["source"]) for o in c.get("outputs", []))
    verdict = "|".join(map(re.escape, VERDICTS))
    pattern = re.compile(rf"^  (Fig\. \d|Table \d)\s+({verdict})|^\s+(decoders): ({verdict})", re.M)
    return [" ".join(filter(None, m)) for m in pattern.findall(text)]


def test_the_stored_cpu_notebooks_print_the_verdicts_the_docs_read():
    """The stored notebooks (notebooks/: the cpu run's executed ones) print, in their claims cell, the verdicts that
    `papa.paper.claims` reads off the stored run today (what the docs and `papa reproduce`'s summary print): a rule
    changed without the notebooks re-executed is caught."""
    from docs import gen_measurements

    readings = gen_measurements.cpu_claims()  # profile_claims(run, "cpu"), read once per test session
    for notebook in sorted((REPO / "notebooks").glob("0*.ipynb")):
        expected = []
        for r in readings:
            if notebook.stem not in (r.notebook, r.decoder.notebook if r.decoder is not None else None):
                continue  # as `profile_claims` keeps a notebook's claims
            expected.append(f"{r.where} {r.verdict}")
            if r.decoder is not None:
                expected.append(f"decoders {r.decoder.verdict}")
        assert _stored_verdicts(notebook) == expected, f"re-execute {notebook.name}: make notebooks"
