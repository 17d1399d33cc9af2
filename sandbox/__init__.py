"""A local, faithful stand-in for the visibility service (see ``sandbox/README.md``).

Entry points: ``sandbox.app.create_app``, ``sandbox.testing.run_sandbox``, ``sandbox.server.serve_forever``.
"""
