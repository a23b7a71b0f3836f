"""Baseline for the cold-start benchmark: the smallest handler on the same base image, with what every
function gets from the base (the entry script, the compiled code, the collector's pause) and nothing
else."""

from common.runtime.coldstart import pause_collector, resume_collector

pause_collector()


def handler(event, context):
    resume_collector()
    return {"hello": "world"}
