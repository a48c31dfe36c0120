"""The warm engine: the zygote, its spares, the warm sandbox that drives them, and the runner that executes a program."""
