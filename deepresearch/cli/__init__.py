"""Thin Typer commands over the library; one module per command group."""
