"""The host's numerical-library settings that reach a run: named ones only, with values that look like settings."""

from __future__ import annotations

from jaxplay.sandbox.isolation.numeric_settings import NUMERICAL_LIBRARY_SETTINGS, numerical_library_settings


def test_only_named_settings_with_setting_like_values_pass():
    host = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "OMP_PLACES": "{0:4}",
            "KMP_AFFINITY": "granularity=fine,compact,1,0", "AWS_SECRET_ACCESS_KEY": "hunter2",
            "OPENBLAS_VERBOSE_PATH": "2", "MKL_NUM_THREADS": "4; rm -rf /", "OMP_NUM_THREADS": "/etc/passwd",
            "OPENBLAS_NUM_THREADS": "x" * 65}
    assert numerical_library_settings(host) == {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512",
                                                "OMP_PLACES": "{0:4}", "KMP_AFFINITY": "granularity=fine,compact,1,0"}
    assert all(name.isupper() and "SECRET" not in name and "PATH" not in name for name in NUMERICAL_LIBRARY_SETTINGS)
