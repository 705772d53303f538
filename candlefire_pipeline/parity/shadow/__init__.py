"""Live evidence: rolling windows of shadow comparisons and the gates that judge them.

Entry: `window` (aggregate a window). `report` writes it to disk, `gates` judges it.
"""
