"""What the ``dfcompass`` commands do, apart from parsing options and printing.

The command line (:mod:`tc_analyses.cli`) parses, calls one function here and echoes what it
returns. These functions read each trace once (:class:`~tc_analyses.inputs.TraceInputs`), run
the analyses and write the artifacts: placement plans and their views, HTML reports, the demo.

One module per thing users do. Nothing is imported here: a command loads only its own module,
and that module imports the heavy libraries lazily, so the CLI starts at once.

* :mod:`~tc_analyses.app.imports`: ``import-kineto`` (a job's files as Dask tasks)
* :mod:`~tc_analyses.app.build`: ``build-analyses``, ``states`` and the schema check of the user's XML
* :mod:`~tc_analyses.app.analyze`: ``analyze TRACE``, and the seed analyses as sections (``report``
  and the job's workers use them too)
* :mod:`~tc_analyses.app.analysis_commands`: ``dfcompass KEY TRACE...`` (each registered analysis) and ``diff``
* :mod:`~tc_analyses.app.jobs`: job folders: ``analyze JOB/`` and ``report JOB/`` (run on Dask by
  :mod:`tc_analyses.cluster`)
* :mod:`~tc_analyses.app.place`: ``recommend-placement`` and ``verify``
* :mod:`~tc_analyses.app.report`: ``report``, one HTML page
* :mod:`~tc_analyses.app.record`: ``record``, and the embedded workloads that record themselves
* :mod:`~tc_analyses.app.demo`: ``demo``

:mod:`tc_analyses.cluster` imports :mod:`~tc_analyses.app.analyze`, :mod:`~tc_analyses.app.report`
(what its workers run) and nothing else of this package; those never import it back.
"""
