"""The benchmark runner: question sets, grading, reports, paper-qa side by side, RAGAS metrics.

A top layer beside :mod:`agent.cli`: it uses the public API and nothing below imports it.
"""
