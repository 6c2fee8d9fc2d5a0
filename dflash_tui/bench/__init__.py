"""`dflash-tui bench`: acceptance, rollback and speed tables by workload and block.

prompts.py reads the workloads, runner.py drives the engine (one loaded target and drafter,
a Session per prompt and block, the target alone as reference), stats.py turns the engine's
RoundRecords into the numbers, tables.py and export.py show and write them, command.py is
the CLI entry point. docs/BENCH.md defines every column.
"""
