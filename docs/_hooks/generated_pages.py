"""MkDocs hook: pages made at build time from files that live elsewhere in the repository, so
that each fact keeps one home.

* ``benchmarks/README.md`` (code and comments point at it) is split at its ``## `` headings:
  the introduction and "Results" become "Today's figures" (with the plots in
  ``docs/img/benchmarks/``, made by ``docs/_hooks/benchmark_plots.py``), every later section
  a page of its own. A new section gets a page named after its heading; until ``mkdocs.yml``'s
  nav lists it, ``--strict`` fails, so none is left out.
* ``notebooks/*.ipynb`` become pages: markdown cells as they are, code cells as Python
  blocks, their saved outputs as text, tables and images embedded in the page (nothing is
  fetched: no require.js, no MathJax). ``notebooks/README.md`` is the section's index.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS_README = ROOT / "benchmarks" / "README.md"
NOTEBOOKS = ROOT / "notebooks"
PLOTS = ROOT / "docs" / "img" / "benchmarks"

#: The page of each section of benchmarks/README.md after "Results", by heading prefix.
BENCHMARK_PAGES = {
    "Ray Data against BulkRunner": "ray-data",
    "Engines as backends": "engine-backend",
    "Same request, same answer": "determinism",
    "The slot runner": "slot-runner",
    "Chat on a GPU": "gpu",
    "Quality": "quality",
    "Figures behind choices in the code": "choices",
}
#: Captions of the plots shown on "Today's figures", by file name.
PLOT_CAPTIONS = {
    "speed-ratios.png": "Ours against the baseline for each figure of `benchmarks/results.json` "
    "(ratio = ours / baseline; the marker says whether higher or lower is better).",
    "transformers-streams.png": "The transformers engine on the 2-core CPU (the 0.5B model, "
    "bf16): tokens/s of all streams together, by number of concurrent greedy streams.",
}


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def benchmark_pages(text: str) -> dict[str, str]:
    """``benchmarks/README.md`` cut at its ``## `` headings: page name -> markdown."""
    parts = re.split(r"(?m)^(?=## )", text)
    pages = {"index": parts[0]}
    for part in parts[1:]:
        title = part.splitlines()[0][3:].strip()
        if title.startswith("Results"):
            pages["index"] += part
            continue
        name = next((v for k, v in BENCHMARK_PAGES.items() if title.startswith(k)), _slug(title))
        # Each page starts at the top level: "## X" becomes the page's title, "### " its parts.
        pages[name] = re.sub(r"(?m)^#(#+) ", r"\1 ", part)
    note = (
        '\n\n!!! note "Source"\n    Every page of this section is cut from '
        "`benchmarks/README.md`, the one home of these figures; edit it there.\n"
    )
    pages["index"] = pages["index"].replace("\n", note + "\n", 1)
    plots = sorted(PLOTS.glob("*.png")) if PLOTS.is_dir() else []
    if plots:
        figures = "".join(
            f"\n![{p.stem}](../img/benchmarks/{p.name})\n\n{PLOT_CAPTIONS.get(p.name, '')}\n"
            for p in plots
        )
        results = "\n## Results"
        pages["index"] = pages["index"].replace(results, "\n## Plots\n" + figures + results, 1)
    return pages


def _output_markdown(output: dict) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return _text_block("".join(output.get("text", "")))
    if kind == "error":
        return _text_block("\n".join(output.get("traceback", [])))
    data = output.get("data", {})
    for mime in ("image/png", "image/jpeg"):
        if mime in data:
            payload = "".join(data[mime]).replace("\n", "")
            base64.b64decode(payload, validate=True)  # a broken image fails the build
            return f'\n<img alt="output" src="data:{mime};base64,{payload}">\n'
    if "text/html" in data:
        page = "".join(data["text/html"])
        if "<script" not in page.lower():  # tables; a widget's scripts would fetch code
            return f'\n<div class="notebook-output">\n{page}\n</div>\n'
    if "text/markdown" in data:
        return "\n" + "".join(data["text/markdown"]) + "\n"
    if "text/plain" in data:
        return _text_block("".join(data["text/plain"]))
    return ""


def _text_block(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)  # terminal colours of tracebacks, tqdm
    return f'\n<pre class="notebook-output"><code>{html.escape(text.rstrip())}</code></pre>\n'


def notebook_markdown(path: Path) -> str:
    """A notebook as a page: its cells in order, with their saved outputs."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    chunks = [
        f'!!! note "Executed notebook"\n    `notebooks/{path.name}`, shown with the outputs '
        "saved when `make notebooks` last ran it; `make test` runs it again every time.\n"
    ]
    for cell in notebook["cells"]:
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            chunks.append(source)
        elif cell["cell_type"] == "code" and source.strip():
            chunks.append(f"```python\n{source}\n```")
            chunks.extend(_output_markdown(o) for o in cell.get("outputs", []))
    text = "\n\n".join(chunks)
    # The notebook's own title goes first, above the note.
    first_title = re.search(r"(?m)^# .+$", text)
    if first_title:
        text = first_title.group(0) + "\n\n" + text.replace(first_title.group(0), "", 1)
    return text


def on_files(files: Files, config) -> Files:
    for name, text in benchmark_pages(BENCHMARKS_README.read_text(encoding="utf-8")).items():
        files.append(File.generated(config, f"benchmarks/{name}.md", content=text))
    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        # The index's table names each notebook's file; link it to its page.
        readme = readme.replace(f"`{path.name}`", f"[`{path.name}`]({path.stem}.md)", 1)
        files.append(
            File.generated(config, f"notebooks/{path.stem}.md", content=notebook_markdown(path))
        )
    files.append(File.generated(config, "notebooks/index.md", content=readme))
    return files
