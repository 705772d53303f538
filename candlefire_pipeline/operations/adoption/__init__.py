"""Adopting the collection the candle-fire app serves (its indexer's Chroma folder or server):
the adoption report, the import (`importer`), the reference column of the parity report
(`reference`); the app's folder is never opened in place (`source`). Entry: `report`."""
