"""The ``perfsuite`` command: one module per subcommand, each a thin shell over the library."""
