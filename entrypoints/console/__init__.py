"""The console: a page served by the API for operators and auditors (jobs, their histories
and proofs, connections, checkpoints), rendered on the server from the API's own use cases."""
