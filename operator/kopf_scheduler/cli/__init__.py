"""The command line: one module per `kopf-scheduler` subcommand, each with ``add_parser`` and ``run``."""
