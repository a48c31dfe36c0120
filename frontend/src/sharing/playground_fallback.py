# --- Exported from the JAX Playground ------------------------------------------------------------
# This program imports the playground's helpers. Outside the playground, the block below stands in
# for them (plain text instead of its views), so the file runs with jax alone.
try:
    import playground  # noqa: F401
except ImportError:
    def _playground_stand_ins():
        import statistics
        import sys
        import timeit as timing
        import types

        import jax

        def display(*values):
            """Each value, shown as a notebook would show it, or printed."""
            try:
                from IPython.display import display as show
            except ImportError:
                show = print
            for value in values:
                show(value)

        class HTML:
            def __init__(self, html):
                self.html = html

            def _repr_html_(self):
                return self.html

            def __repr__(self):
                return self.html

        def show_sharding(x, name=None):
            """How each array of ``x`` is laid out over the devices, as text."""
            for path, leaf in jax.tree_util.tree_leaves_with_path(x):
                label = (name or "") + jax.tree_util.keystr(path)
                if label:
                    print(label)
                try:
                    jax.debug.visualize_array_sharding(leaf)
                except Exception:  # noqa: BLE001 - more than 2 dimensions, or not an array
                    print(getattr(leaf, "sharding", type(leaf).__name__))

        class TimingResult(types.SimpleNamespace):
            def __str__(self):
                return (f"{self.label}: {self.median * 1e6:.3g} µs per loop (median of {len(self.samples)} "
                        f"runs, {self.loops:,} loops each; min {self.min * 1e6:.3g} µs)")

        def timeit(fn, *args, number=None, repeat=7, label=None, **kwargs):
            """``timeit(f, x)`` or ``timeit("f(x)")``: seconds per call, each call waited for."""
            if isinstance(fn, str):
                caller = sys._getframe(1)
                namespace, code = {**caller.f_globals, **caller.f_locals}, compile(fn, "<timeit>", "eval")
                label = label or fn

                def call():
                    return eval(code, namespace)
            else:
                label = label or getattr(fn, "__name__", repr(fn))

                def call():
                    return fn(*args, **kwargs)
            jax.block_until_ready(call())  # the first call compiles
            timer = timing.Timer(lambda: jax.block_until_ready(call()))
            loops = number or timer.autorange()[0]
            samples = [total / loops for total in timer.repeat(repeat=repeat, number=loops)]
            result = TimingResult(label=label, samples=samples, loops=loops, median=statistics.median(samples),
                                  min=min(samples), max=max(samples), mean=statistics.fmean(samples))
            print(result)
            return result

        module = types.ModuleType("playground")
        module.__dict__.update(display=display, HTML=HTML, show_sharding=show_sharding, timeit=timeit,
                               TimingResult=TimingResult)
        return module

    import sys as _sys
    _sys.modules["playground"] = _playground_stand_ins()
    del _playground_stand_ins
# --------------------------------------------------------------------------------------------------

