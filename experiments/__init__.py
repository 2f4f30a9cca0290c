"""The research scripts behind the kit's measured tables: not part of the installed product.

Each module runs from the repository root as ``python -m experiments.<name>``:
:mod:`experiments.run` trains and scores the presets of one experiment (``--track``) and writes
its tables and plots; :mod:`experiments.report`, :mod:`experiments.personal_report`,
:mod:`experiments.dp_scale_report`, :mod:`experiments.fsp_report` and
:mod:`experiments.round_scores` read finished run directories into those tables, which
:mod:`experiments.results_file` writes as the data files the results pages render;
:mod:`experiments.pflkit_command` runs ``pflkit`` as a child process for all of them.
"""
