"""Throughput: how many chunks an embedder gets through per core (and on a local Ray cluster), and
how many requests one shared reader serves to concurrent clients.

Entry: `benchmark` (the `throughput` and `concurrency` benchmarks). `per_core` measures the
embedders with `models` (a random-weight MPNet-base) and `local_ray` (a Ray head on 127.0.0.1);
`shared_reader` drives one ServingReader per store from 1-8 threads.
"""
