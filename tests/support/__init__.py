"""Helpers the suites share: the service wired on the in-memory twins (``twins``), the
connection use cases on them (``connection_kit``), an HTTP client of that service (``http``) and
an independent message signer (``signing``)."""
