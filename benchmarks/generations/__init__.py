"""Index generations: building a new generation beside the serving one, against a cold rebuild.

Entry: `benchmark` (the `generations` benchmark). `beside` runs it on the drops `workload`
writes, while `workload.serve` queries the serving generation from another process.
"""
