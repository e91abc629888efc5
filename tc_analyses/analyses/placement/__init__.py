"""Device placement: HEFT, local search, the exact MILP, synthetic problems and the recommendation.

The problem, cost models, device table and simulator they share are in :mod:`tc_analyses.perf`.
"""
