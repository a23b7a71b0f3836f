"""Baseline for the cold-start benchmark: the smallest handler on the same base image, with what every
function gets from the base (the entry script, the compiled code) and nothing else."""


def handler(event, context):
    return {"hello": "world"}
