"""The performance model shared by the roofline, parallelism and placement analyses.

* :mod:`.cost`: FLOPs and bytes of one op execution (``estimate_op``), its roofline time on a
  device (``modelled_ns``), transfer fits (``fit_link``), the step timing measured in a trace
  (``measure_steps``) and the placement problem of a computation graph (``build_problem``);
* :mod:`.devices`: the hardware table (device peaks, link specs) and the ``--devices`` parser;
* :mod:`.problem`: tasks with per-device costs, devices, links, placements and schedules;
* :mod:`.simulate`: the discrete-event simulator that predicts a placement's makespan.

It sits between the model and the analyses: it reads traces and the model, and the analyses
import it (:mod:`tc_analyses.analyses.placement` optimises on it, the parallelism analysis
simulates its plans with it, the roofline takes its op costs and peaks).
"""
