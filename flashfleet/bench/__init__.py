"""Benchmarking a deployed stack: workload profiles, the bench_serving driver, results, reports.

Imports nothing heavy at package level: matplotlib loads only when a plot is drawn.
"""
