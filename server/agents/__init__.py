"""Coding assistants as clients: the ``/mcp`` endpoint (Model Context Protocol, Streamable HTTP).

``endpoint`` checks a request (Origin, its token) and hands it to the SDK;
``tools`` are what an assistant may call; ``agent_runs`` takes each run
through the one path every run takes (``runs/run_path.RunPath``: limits,
flags, watchers, fair queue, metrics);
``answers`` and ``protocol`` shape what a tool answers; ``links`` makes
links to recorded runs; ``tokens`` keeps the operator's tokens, hashed;
``sandbox_rules`` tells an assistant what a program may do. docs/agents.md
is the guide.
"""
