"""The hints shown under an error for JAX APIs that were removed or moved, as data.

Each entry names the exceptions and the message (a regular expression
searched in ``str(exc)``) it answers, optionally the erroring source line,
and the hint (``\\1`` is the message's first group). ``failing`` is a program
that raises it and gets the hint; ``correct`` is the fixed program, which
runs and shows no hint: tests/unit/test_error_hints.py runs both for every
entry, and tests/unit/test_error_hints_runtimes.py runs every ``failing``
program on every JAX runtime offered, so an entry that stops matching what a
JAX says fails a test. Each JAX words some errors its own way (0.6 names the
version that removed ``jax.tree_map``; 0.4 says "shapes" where 0.10 says
"types"): the messages match every wording. ``fails_from``: the oldest JAX on
which ``failing`` raises (before it, the API still worked).
"""

from __future__ import annotations

from dataclasses import dataclass

IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")


@dataclass(frozen=True)
class Hint:
    name: str
    exceptions: tuple[str, ...]
    message: str
    hint: str
    failing: str
    correct: str
    #: A regular expression the erroring line must match too (for syntax errors, whose message is generic).
    source: str = ""
    #: The oldest JAX on which ``failing`` raises; older ones still had the API.
    fails_from: str = ""


HINTS: tuple[Hint, ...] = (
    Hint(
        name="stax",
        exceptions=IMPORT_ERRORS,
        message=r"jax\.experimental\.stax|'stax' from 'jax\.experimental'",
        hint="jax.experimental.stax moved to jax.example_libraries.stax: "
             "write `from jax.example_libraries import stax`.",
        failing="from jax.experimental import stax\n",
        correct="from jax.example_libraries import stax\nprint(stax.Dense)\n",
    ),
    Hint(
        name="optimizers",
        exceptions=IMPORT_ERRORS,
        message=r"jax\.experimental\.optimizers|'optimizers' from 'jax\.experimental'",
        hint="jax.experimental.optimizers moved to jax.example_libraries.optimizers: "
             "write `from jax.example_libraries import optimizers`. For new code, optax is the "
             "maintained optimizer library.",
        failing="from jax.experimental import optimizers\n",
        correct="from jax.example_libraries import optimizers\nprint(optimizers.adam)\n",
    ),
    Hint(
        name="minmax",
        exceptions=IMPORT_ERRORS,
        message=r"jax\.experimental\.minmax|'minmax' from 'jax\.experimental'",
        hint="jax.experimental.minmax became jax.example_libraries.optimizers: "
             "write `from jax.example_libraries import optimizers` (or use optax).",
        failing="from jax.experimental import minmax\n",
        correct="from jax.example_libraries import optimizers\nprint(optimizers.sgd)\n",
    ),
    Hint(
        name="tree_multimap",
        exceptions=("AttributeError",),
        message=r"module 'jax' has no attribute 'tree_multimap'",
        hint="jax.tree_multimap was removed: jax.tree.map takes several trees, `jax.tree.map(f, a, b)`.",
        failing="import jax\njax.tree_multimap(lambda a, b: a + b, [1], [2])\n",
        correct="import jax\nprint(jax.tree.map(lambda a, b: a + b, [1], [2]))\n",
    ),
    Hint(
        name="tree_functions",
        exceptions=("AttributeError",),
        # JAX 0.6 to 0.9: "jax.tree_map was removed in JAX v0.6.0: ..."; 0.10 and newer: no attribute.
        message=r"(?:module 'jax' has no attribute 'tree_|^jax\.tree_)"
                r"(map|leaves|flatten|unflatten|structure|transpose|reduce|all)(?:'| was removed)",
        hint=r"jax.tree_\1 was removed: use jax.tree.\1 (or jax.tree_util.tree_\1).",
        failing="import jax\njax.tree_map(lambda x: x * 2, [1, 2])\n",
        correct="import jax\nprint(jax.tree.map(lambda x: x * 2, [1, 2]))\n",
        fails_from="0.6.0",
    ),
    Hint(
        name="xla_computation",
        exceptions=("AttributeError",),
        message=r"module 'jax' has no attribute 'xla_computation'",
        hint="jax.xla_computation was removed: `jax.jit(f).lower(x).as_text()` gives the StableHLO and "
             "`jax.jit(f).lower(x).compile().as_text()` the optimized HLO (Inspect shows both for every "
             "jitted function).",
        failing="import jax\njax.xla_computation(lambda x: x + 1)(1.0)\n",
        correct="import jax\nprint(jax.jit(lambda x: x + 1).lower(1.0).as_text().split()[0])\n",
    ),
    Hint(
        name="host_callback",
        exceptions=IMPORT_ERRORS,
        message=r"jax\.experimental\.host_callback|'host_callback' from 'jax\.experimental'",
        hint="jax.experimental.host_callback was removed: inside jitted code print with "
             "`jax.debug.print(\"x={x}\", x=x)`, run Python with `jax.debug.callback(f, x)`, or compute a "
             "value in Python with `jax.pure_callback`.",
        failing="from jax.experimental import host_callback\n",
        correct="import jax\njax.jit(lambda x: jax.debug.print(\"x={x}\", x=x))(1.0)\n",
        fails_from="0.8.0",
    ),
    Hint(
        name="vmap_arguments",
        exceptions=("TypeError", "ValueError"),
        message=r"vmap in_axes must be an int, None, or a tuple of entries.*but got (\[|Array|Traced)",
        hint="jax.vmap(f) returns the batched function; call it with the arrays: "
             "`jax.vmap(f)(x, y)`, not `jax.vmap(f, x, y)` (vmap's own second argument is in_axes).",
        failing="import jax, jax.numpy as jnp\nx = y = jnp.ones(3)\njax.vmap(lambda a, b: a + b, x, y)\n",
        correct="import jax, jax.numpy as jnp\nx = y = jnp.ones(3)\nprint(jax.vmap(lambda a, b: a + b)(x, y))\n",
    ),
    Hint(
        name="axes_keyword",
        exceptions=("TypeError",),
        message=r"unexpected keyword argument '(in|out)_axis'",
        hint=r"The keyword is \1_axes (plural): `jax.vmap(f, \1_axes=0)`.",
        failing="import jax, jax.numpy as jnp\njax.vmap(lambda a: a * 2, in_axis=0)(jnp.ones(3))\n",
        correct="import jax, jax.numpy as jnp\nprint(jax.vmap(lambda a: a * 2, in_axes=0)(jnp.ones(3)))\n",
    ),
    Hint(
        name="prng_key_seed",
        exceptions=("TypeError",),
        message=r"invalid PRNG key data",
        hint="jax.random functions take a key, not a seed: make one with `key = jax.random.key(0)`, then "
             "`jax.random.normal(key, (3,))`. For each new draw split it: `key, sub = jax.random.split(key)`.",
        failing="import jax\njax.random.normal(0, (3,))\n",
        correct="import jax\nkey = jax.random.key(0)\nprint(jax.random.normal(key, (3,)))\n",
    ),
    Hint(
        name="prng_seed_integer",
        exceptions=("TypeError",),
        message=r"PRNG key seed must be an integer",
        hint="A PRNG seed is an integer: `jax.random.key(0)`. For new random numbers split the key, "
             "`key, sub = jax.random.split(key)`, instead of making keys from other values.",
        failing="import jax\njax.random.key(0.5)\n",
        correct="import jax\nprint(jax.random.normal(jax.random.key(0), (2,)).shape)\n",
    ),
    Hint(
        name="matmul_shapes",
        exceptions=("TypeError",),
        message=r"dot_general requires contracting dimensions to have the same shape, got (\([^)]*\)) and (\([^)]*\))",
        hint=r"`a @ b` needs the last axis of a to match the first axis of b (the second-to-last, for "
             r"batches): here \1 against \2. Print `a.shape` and `b.shape`; transpose with `.T` or reshape.",
        failing="import jax.numpy as jnp\njnp.ones((2, 3)) @ jnp.ones((4, 2))\n",
        correct="import jax.numpy as jnp\nprint((jnp.ones((2, 3)) @ jnp.ones((3, 2))).shape)\n",
    ),
    Hint(
        name="broadcast_shapes",
        exceptions=("TypeError",),
        message=r"^(\w+) got incompatible shapes for broadcasting: (\([^)]*\)), (\([^)]*\))",
        hint=r"Element-wise \1 (`+`, `*`, ...) needs shapes that broadcast: compared from the last axis, each "
             r"pair of sizes must be equal or 1, and \2 and \3 are not. Reshape, transpose, or add an axis "
             r"with `x[:, None]`.",
        failing="import jax.numpy as jnp\njnp.ones(3) + jnp.ones(4)\n",
        correct="import jax.numpy as jnp\nprint(jnp.ones(3) + jnp.ones((4, 1)))\n",
    ),
    Hint(
        name="broadcast_ranks",
        exceptions=("ValueError",),
        # Arrays of different ranks, jnp.where, jnp.broadcast_shapes: the same words on every JAX.
        message=r"Incompatible shapes for broadcasting: shapes=\[(.*)\]",
        hint=r"Arrays of shapes \1 do not broadcast: compared from the last axis, each pair of sizes must be "
             r"equal or 1 (an axis one of them lacks counts as 1). Reshape, transpose, or add an axis with "
             r"`x[:, None]`.",
        failing="import jax.numpy as jnp\njnp.ones((2, 3)) + jnp.ones(4)\n",
        correct="import jax.numpy as jnp\nprint(jnp.ones((2, 3)) + jnp.ones(3))\n",
    ),
    Hint(
        name="broadcast_to",
        exceptions=("ValueError",),
        # JAX 0.4: "shapes: (3,) and requested shape (4,)"; newer: "types: input type=float32[3] and ...".
        message=r"Incompatible (?:shapes|types) for broadcasting: (?:input type=)?(.+?) and requested "
                r"(?:shape |type=)(\S+)",
        hint=r"jnp.broadcast_to can only add leading axes and stretch axes of size 1: \1 cannot become \2. "
             r"Give a shape that ends with the array's own, e.g. `jnp.broadcast_to(x, (4, *x.shape))`.",
        failing="import jax.numpy as jnp\njnp.broadcast_to(jnp.ones(3), (4,))\n",
        correct="import jax.numpy as jnp\nprint(jnp.broadcast_to(jnp.ones(3), (4, 3)).shape)\n",
    ),
    Hint(
        name="tracer_bool",
        exceptions=("TracerBoolConversionError",),
        message=r"Attempted boolean conversion of traced array",
        hint="Inside jax.jit, `if`, `while`, `and`, `or` and `bool()` cannot see an argument's value. Pick "
             "values with `jnp.where(x > 0, x, -x)`, branch with `jax.lax.cond(x > 0, f, g, x)`, or make the "
             "argument static: `jax.jit(f, static_argnums=0)` (one compilation per value).",
        failing="import jax\n@jax.jit\ndef f(x):\n    if x > 0:\n        return x\n    return -x\nf(1.0)\n",
        correct="import jax, jax.numpy as jnp\n@jax.jit\ndef f(x):\n    return jnp.where(x > 0, x, -x)\nprint(f(1.0))\n",
    ),
    Hint(
        name="timeit_magic",
        exceptions=("SyntaxError",),
        message=r"invalid syntax",
        source=r"^\s*%%?timeit\b",
        hint="%timeit is IPython syntax. Here: `from playground import timeit`, then `timeit(f, x)` "
             "(a function and its arguments) or `timeit(\"f(x)\")`.",
        failing="x = 2\n%timeit x * x\n",
        correct="from playground import timeit\nx = 2\ntimeit(lambda: x * x, number=10)\n",
    ),
    Hint(
        name="shell_and_magics",
        exceptions=("SyntaxError",),
        message=r"invalid syntax",
        source=r"^\s*(!|%%?(?!timeit\b)\w)",
        hint="Lines starting with % or ! are IPython magics and shell commands; "
             "a playground run is plain Python, and its packages are already installed.",
        failing="!pip install optax\nprint(1)\n",
        correct="print(1)\n",
    ),
)
