"""The parameterised notebooks: their files, parameters, headless runs and sweeps (:mod:`~gsworkbench.jupyter.sweep`).

Each notebook is a jupytext percent-format script ``notebooks/NN_name.py`` (the tracked, reviewed,
linted source) with a ``notebooks/NN_name.ipynb`` beside it that ``make setup`` generates
(``gsworkbench sync-notebooks``) and git ignores; ``jupytext.toml`` pairs the two for JupyterLab, and
papermill and nbval run the ``.ipynb``. Its cells follow one convention:
- the first code cell ``guard = ParameterGuard(name={"ge": 1}, ...)``: the parameters' rules
  (``ge``/``gt``/``le``/``lt`` bounds, ``choices``, ``path`` ("file"/"dir"), ``min_len``, ``help``);
- a cell tagged ``parameters`` of plain ``name = literal`` assignments (the defaults), always including
  ``results_dir = ""`` (empty: the notebook makes its own ``results/<run-id>/``);
- right after it, ``params = guard.check(globals())``, which fails with a clear message on a parameter
  the notebook does not know, of the wrong type or outside its rule (papermill itself only warns);
- ``metadata.gsworkbench.smoke_parameters`` (in the script's YAML header): small parameters for the tests.
The command line checks parameters against the same rules before a kernel starts.
"""

from gsworkbench.core.project import notebook_dir
from gsworkbench.jupyter.files import (
    NotebookNotGenerated,
    list_notebooks,
    list_scripts,
    load_notebook,
    notebook_defaults,
    notebook_from_script,
    notebook_rules,
    smoke_parameters,
    sync_notebooks,
)
from gsworkbench.jupyter.parameters import (
    ParameterError,
    ParameterGuard,
    coerce_parameter,
    describe_rule,
    parse_cli_value,
    parse_parameters_source,
    parse_rules_source,
    type_label,
    validate_parameters,
)
from gsworkbench.jupyter.runner import (
    KERNEL_NAME,
    NotebookFailed,
    NotebookInterrupted,
    NotebookKernelDied,
    check_parameters,
    kernel_name,
    prepare_smoke,
    run_all,
    run_notebook,
)

__all__ = [
    "KERNEL_NAME",
    "NotebookFailed",
    "NotebookInterrupted",
    "NotebookKernelDied",
    "NotebookNotGenerated",
    "ParameterError",
    "ParameterGuard",
    "check_parameters",
    "coerce_parameter",
    "describe_rule",
    "kernel_name",
    "list_notebooks",
    "list_scripts",
    "load_notebook",
    "notebook_dir",
    "notebook_defaults",
    "notebook_from_script",
    "notebook_rules",
    "parse_cli_value",
    "parse_parameters_source",
    "parse_rules_source",
    "prepare_smoke",
    "run_all",
    "run_notebook",
    "smoke_parameters",
    "sync_notebooks",
    "type_label",
    "validate_parameters",
]
