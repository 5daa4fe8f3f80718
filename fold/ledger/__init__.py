"""The ledger: every kept run's document and figures in one DuckDB file, their history, and
their export as Parquet."""
