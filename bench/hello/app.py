"""Baseline for the cold-start benchmark: the smallest handler on the same base image."""


def handler(event, context):
    return {"hello": "world"}
