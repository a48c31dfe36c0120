"""The editor's API index shows signatures as a person reads them: a sentinel default by its name, never a
memory address that differs in every process (``<NoDefault object at 0x7f32...>``)."""

from __future__ import annotations

import re
import subprocess
import sys

from jaxplay.sandbox.learning.api_index import signature_of


class NoDefault:
    pass


_NO_DEFAULT = NoDefault()


def config_like(new_val=_NO_DEFAULT, *, hook=print, fallback=lambda: 0, axis=None, name="x"):  # noqa: ANN001
    return new_val


def test_a_sentinel_default_is_shown_by_its_class_name_and_plain_defaults_are_kept():
    text = signature_of(config_like)
    assert "0x" not in text, text
    assert text.startswith("(new_val=NoDefault, *, hook=print, fallback=<lambda>")
    assert text.endswith("axis=None, name='x')")


def test_no_signature_in_a_real_jax_index_has_an_address():
    """The server's own JAX (the default runtime), as the server makes its index: one subprocess."""
    out = subprocess.run([sys.executable, "-m", "jaxplay.sandbox.learning.api_index"], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert '"format":2' in out[:20]
    addresses = re.findall(r".{60}at 0x[0-9a-fA-F]{6,}.{10}", out)
    assert not addresses, addresses[:5]
    assert "NoDefault" in out  # jax.config's sentinel is in several signatures, by name
