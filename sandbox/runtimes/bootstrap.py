"""Run as a script by a JAX runtime's Python: load ``jaxplay`` alone from its folder, then run a module.

``python -s -P bootstrap.py JAXPLAY_FOLDER MODULE ARGS...`` is what
sandbox/runtimes/launch.py builds. A script, not ``-c`` code: its frame, at the
bottom of every stack of the zygote and the shared cache's fill, lies in the
sandbox's folder, which JAX is told to leave out of source locations (a
``<string>`` frame would be in them, and in the persistent cache's keys, so a
run would never find what the fill compiled). ``-P`` keeps this folder off
``sys.path``. Nothing here may import what the runtime's Python lacks.
"""

import importlib.util
import runpy
import sys


def load_jaxplay(folder: str) -> None:
    spec = importlib.util.spec_from_file_location("jaxplay", folder + "/__init__.py",
                                                  submodule_search_locations=[folder])
    assert spec is not None and spec.loader is not None
    sys.modules["jaxplay"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["jaxplay"])


if __name__ == "__main__":
    load_jaxplay(sys.argv.pop(1))
    runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
