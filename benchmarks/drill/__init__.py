"""The crash drill at 62k chunks: SIGKILL at >= 50 random points of a drop. Entry: `run`."""
