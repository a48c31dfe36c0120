"""What a sandbox may read: our packages, the interpreter and the needed distributions, never a whole site-packages."""

from __future__ import annotations

import os
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from jaxplay.sandbox.isolation import bwrap, exposed_paths

SITE = Path(sysconfig.get_paths()["purelib"])


def test_a_dependency_is_classified_as_sandbox_or_host_only():
    # A new requirement in pyproject.toml must say whether runs may import it.
    for requirement in metadata.distribution("jaxplay").requires or []:
        name, extra = exposed_paths.requirement_name_and_extra(requirement)
        if extra is None:
            assert name in exposed_paths.SANDBOX_REQUIREMENTS | exposed_paths.HOST_ONLY_REQUIREMENTS, name


def test_requirement_names_and_extras_are_read():
    read = exposed_paths.requirement_name_and_extra
    assert read('jax-cuda12-plugin[with-cuda]<=0.10.2,>=0.10.2; extra == "cuda12"') == ("jax-cuda12-plugin", "cuda12")
    assert read("Jinja2>=3.1") == ("jinja2", None)
    assert read("typing_extensions; python_version < '3.12'") == ("typing-extensions", None)


def test_site_packages_is_exposed_entry_by_entry():
    paths = exposed_paths.exposed_paths()
    assert SITE not in paths and Path(sys.prefix) not in paths
    names = {p.name for p in paths if p.parent == SITE}
    for needed in ("jax", "jaxlib", "numpy", "treescope", "matplotlib", "ml_dtypes"):
        assert needed in names, needed
    # Server-side and test-only distributions stay out.
    for host_only in ("starlette", "uvicorn", "websockets", "_pytest", "playwright", "httpx"):
        assert host_only not in names, host_only


def test_own_packages_and_interpreter_are_exposed_but_not_the_checkout():
    paths = exposed_paths.exposed_paths()
    assert bwrap.IMPORT_ROOT / "sandbox" in paths and bwrap.IMPORT_ROOT / "jaxplay" / "__init__.py" in paths
    assert bwrap.IMPORT_ROOT not in paths and bwrap.IMPORT_ROOT / "jaxplay" not in paths
    for hidden in ("server", "jaxplay/cli", ".git", "data", "frontend"):
        assert not any(p == bwrap.IMPORT_ROOT / hidden or p.is_relative_to(bwrap.IMPORT_ROOT / hidden)
                       for p in paths), hidden
    assert Path(sys.executable) in paths or exposed_paths.is_under_usr(Path(sys.executable))


def test_a_dependencys_test_extra_stays_out_even_when_all_of_it_is_installed():
    # pandas' "test" extra is pytest and pytest-xdist, which the test venv has: still not a run's.
    names = {normalized(d) for d in exposed_paths.needed_distributions(["pandas"])}
    assert "pandas" in names and "numpy" in names
    assert not names & {"pytest", "pytest-xdist", "execnet"}, names
    assert exposed_paths.DEVELOPMENT_EXTRA.match("test") and exposed_paths.DEVELOPMENT_EXTRA.match("test-no-images")
    assert not exposed_paths.DEVELOPMENT_EXTRA.match("with-cuda") and not exposed_paths.DEVELOPMENT_EXTRA.match("tpu")


def test_an_extra_counts_only_when_all_of_it_is_installed():
    # jax's "k8s" extra needs kubernetes, which a playground venv does not have.
    names = {normalized(d) for d in exposed_paths.needed_distributions(["jax"])}
    assert {"jax", "jaxlib", "numpy", "ml-dtypes", "opt-einsum", "scipy"} <= names
    assert "kubernetes" not in names and "pytest" not in names


def test_the_base_installs_own_site_packages_stays_hidden():
    base = Path(sys.base_prefix).resolve()
    if exposed_paths.is_under_usr(base):
        pytest.skip("the interpreter is under /usr, which bwrap binds whole")
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    paths = exposed_paths.exposed_paths()
    assert stdlib / "os.py" in paths
    assert stdlib / "site-packages" not in paths and stdlib not in paths


def normalized(dist: metadata.Distribution) -> str:
    return exposed_paths.normalize(dist.metadata["Name"])


def test_root_staging_binds_each_folder_once_and_fits_one_argument():
    if os.geteuid() != 0:
        pytest.skip("staging happens only when the worker runs as root")
    script = bwrap.sandbox_command(["python"], {}, [])[-1]
    paths = exposed_paths.exposed_paths()
    folders = {p.resolve().parent for p in paths}
    assert script.count("mount --rbind ") == len(folders) < len(paths)
    assert len(script.encode()) < 128 * 1024  # MAX_ARG_STRLEN: the script is one argument of sh -c


def _fake_distribution(site: Path, name: str, requires: list[str], files: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{info.name}/METADATA"]))
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).touch()


def test_the_cuda_libraries_the_plugin_loads_are_exposed_though_its_extra_is_partly_installed(tmp_path, monkeypatch):
    # As on a GPU host: jax[cuda13] with the plugin's with-cuda extra missing one package (nvidia-cuda-nvcc).
    # The plugin loads site-packages/nvidia/... when present, so the sandbox must see exactly those.
    site = tmp_path / "site-packages"
    _fake_distribution(site, "jax", ['jax-cuda13-plugin[with-cuda]; extra == "cuda13"', 'jaxlib; extra == "cuda13"'],
                       ["jax/__init__.py"])
    _fake_distribution(site, "jaxlib", [], ["jaxlib/__init__.py"])
    _fake_distribution(site, "jax-cuda13-plugin", [
        "jax-cuda13-pjrt",
        'nvidia-cublas>=13; sys_platform == "linux" and extra == "with-cuda"',
        'nvidia-cuda-nvcc>=13; sys_platform == "linux" and extra == "with-cuda"'], ["jax_cuda13_plugin/x.so"])
    _fake_distribution(site, "jax-cuda13-pjrt", [], ["jax_plugins/xla_cuda13/xla_cuda_plugin.so"])
    _fake_distribution(site, "nvidia-cublas", [], ["nvidia/cu13/lib/libcublas.so.13"])
    # An ordinary library's partly installed extra still stays out (pytest is installed, "missing" is not).
    _fake_distribution(site, "somelib", ['pytest; extra == "test"', 'missing; extra == "test"'], ["somelib.py"])
    monkeypatch.syspath_prepend(str(site))
    names = {normalized(d) for d in exposed_paths.needed_distributions(["jax", "somelib"])}
    assert {"jax-cuda13-plugin", "jax-cuda13-pjrt", "nvidia-cublas"} <= names
    assert "pytest" not in names
    entries = set().union(*(exposed_paths.distribution_entries(d) for d in exposed_paths.needed_distributions(["jax"])))
    assert site / "nvidia" in entries and site / "jax_plugins" in entries
