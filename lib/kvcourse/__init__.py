"""Course library."""
