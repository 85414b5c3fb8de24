"""Benchmarks: one package per benchmark, each composing data, tasks and scoring.

``icl.benchmarks.best50``: cross-image in-context detection (PROTOCOL §2).
"""
