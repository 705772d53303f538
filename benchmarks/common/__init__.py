"""What every benchmark shares: how it measures, where its figures go, the options it takes,
and the workload (data, synthetic corpus, requests, stores, exact oracles).

Entry: `options` (the options every benchmark spells the same way, and what --quick sets).
Measurement: `figures` (timed, p50 / p95, chunk recall, MB), `machine_load` (LoadMonitor: the
load during a run, flagged when other work shared the machine) with `cpu_share`; `section`
writes a docs/BENCHMARKS.md section. Workload: `data` (paths, SciFact, the embedding cache),
`texts` (real chunk texts: SciFact abstracts, PMC sections), `corpus` (the synthetic corpus),
`requests` (the request mix, the 62k workload, recall against an oracle), `stores` (the
benchmarks' embedded Postgres and the 62k stores), `matrix_oracle` (exact search at any size),
`scaled/` (the workload and its stores at any size).
"""
