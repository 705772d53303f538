"""The parity report: the data, its files on disk, its Markdown and plots.

Entry: `model` (the report as data). `files` writes and reads it, `markdown` and `plots`
render it.
"""
