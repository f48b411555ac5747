"""The CLI's commands (typer): each parses its options, builds a library config, calls the
library and renders the result with ``views`` / ``reports``; domain errors become one line."""
