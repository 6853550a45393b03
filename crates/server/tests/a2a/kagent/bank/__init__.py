"""A kagent agent (kagent-adk 0.10.4) for crates/server/tests/suite/remote_kagent.rs, served
by `kagent-adk run bank --local`: see agent.py."""

from . import agent  # noqa: F401
