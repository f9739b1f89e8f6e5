"""The ``regioncount`` command-line tool (typer). Thin: parse, call the library, render, write files."""
