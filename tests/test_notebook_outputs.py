"""The committed notebooks carry the outputs of a complete, successful run (issue 6).

nbmake checks that the notebooks run; this checks what readers see on GitHub: every code cell
was executed, in order, and none of them shows an error (an interrupted `--overwrite` run once
left a traceback in a committed notebook while the notebook itself was fine).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def code_cells(path: Path) -> list[dict]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_ran_in_order_without_an_error(path: Path):
    cells = code_cells(path)
    counts = [cell["execution_count"] for cell in cells]
    assert counts == list(range(1, len(cells) + 1)), counts
    errors = [o for cell in cells for o in cell["outputs"] if o["output_type"] == "error"]
    assert not errors, [f"{e['ename']}: {e['evalue']}" for e in errors]


def test_the_data_frame_notebook_shows_its_plots():
    [path] = [p for p in NOTEBOOKS if p.name == "05_dataframes.ipynb"]
    images = [
        o for cell in code_cells(path) for o in cell["outputs"] if "image/png" in o.get("data", {})
    ]
    assert len(images) >= 3  # the heatmap, the 2-D map and the verdict chart


def test_the_report_notebook_shows_the_marked_answers_and_the_plot():
    [path] = [p for p in NOTEBOOKS if p.name == "07_groundedness_report.ipynb"]
    outputs = [o for cell in code_cells(path) for o in cell["outputs"]]
    marked = [o for o in outputs if "<mark" in "".join(o.get("data", {}).get("text/html", ""))]
    assert marked  # the unsupported sentences, marked by their offsets
    assert any("image/png" in o.get("data", {}) for o in outputs)  # support per claim
