"""dsh_assets: anonymised releases of a telecom measurement table, with evidence."""

__version__ = "0.1.0"
