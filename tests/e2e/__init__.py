"""End-to-end tests: the memory server as a subprocess with write-through stores configured.

A package so that ``endtoend`` (the shared config writer and store backdoors) is importable as
``e2e.endtoend`` from the reliability tests too.
"""
