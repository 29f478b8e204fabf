"""Tools on top of the flow, each a library function first and a command second: the fault self-test."""
