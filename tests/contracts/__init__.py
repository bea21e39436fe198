"""Contracts of the ports: one class of tests per port, run against every adapter of it.

The in-memory and embedded twins run them in ``tests/unit``, the adapters on real servers in
``tests/integration``. A subclass supplies the adapter and a way to look behind it.
"""
