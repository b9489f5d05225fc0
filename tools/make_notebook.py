"""Writes a notebook from a compact cell list (used to author the notebooks in notebooks/).

Usage in a script: make_notebook(path, cells, smoke_parameters) with cells a list of
("md" | "code" | "parameters", source).
"""

from __future__ import annotations

from pathlib import Path

import nbformat


def make_notebook(path: str, cells: list[tuple[str, str]], smoke_parameters: dict) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "gsworkbench", "display_name": "gsworkbench (.venv)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["gsworkbench"] = {"smoke_parameters": smoke_parameters}
    for kind, src in cells:
        src = src.strip("\n")
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(src))
        else:
            cell = nbformat.v4.new_code_cell(src)
            if kind == "parameters":
                cell.metadata["tags"] = ["parameters"]
            nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    nbformat.validate(nb)
    nbformat.write(nb, Path(__file__).resolve().parent.parent / path)
