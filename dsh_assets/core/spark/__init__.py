"""The release on Apache Spark (optional: ``pip install -e '.[spark]'``): the same rows as the embedded engine."""
