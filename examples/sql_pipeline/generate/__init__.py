"""`python -m examples.sql_pipeline.generate`: the sql_pipeline example's input.

A package, not a `generate.py` beside the pipeline files: `odradek pipeline run` reads every
.py file of the directory as a pipeline file, and skips directories.
"""
