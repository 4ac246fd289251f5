"""Tools the scholarloop agent can call."""
