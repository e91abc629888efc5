"""Device placement: the problem, cost models, optimisers and a discrete-event simulator."""
