"""The warm engine: the zygote, its spares, the slot that drives them, and the runner that executes a program."""
