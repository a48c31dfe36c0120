"""The allow-list of JAX options and XLA flags: what it accepts, its canonical form, and every refused form."""

from __future__ import annotations

import pytest

from jaxplay import browser_protocol as bp
from jaxplay import run_flags
from jaxplay import worker_protocol as wp
from jaxplay.run_flags import FlagError, validate

OFFERED = ("0.4.38", "0.6.2", "0.10.2", "0.12.0.1")


def test_accepted_values_take_their_canonical_form() -> None:
    flags = validate({"config": {"jax_numpy_rank_promotion": "raise", "jax_enable_x64": True},
                      "xla": {"--xla_disable_hlo_passes": "cse,algsimp,cse", "xla_backend_optimization_level": "1",
                              "xla_cpu_prefer_vector_width": 256}})
    assert flags.summary() == ("jax_enable_x64=true jax_numpy_rank_promotion=raise "
                               "--xla_backend_optimization_level=1 --xla_cpu_prefer_vector_width=256 "
                               "--xla_disable_hlo_passes=algsimp,cse")
    assert flags.xla_flags_text() == ("--xla_backend_optimization_level=1 --xla_cpu_prefer_vector_width=256 "
                                      "--xla_disable_hlo_passes=algsimp,cse")
    assert flags.config_values() == {"jax_enable_x64": True, "jax_numpy_rank_promotion": "raise"}
    # The same flags however written: one form, one digest; a plain dict round-trips.
    same = validate({"xla": {"xla_disable_hlo_passes": ["algsimp", "cse"], "xla_cpu_prefer_vector_width": "256",
                             "xla_backend_optimization_level": 1},
                     "config": {"jax_enable_x64": "true", "jax_numpy_rank_promotion": "raise"}})
    assert same == flags and same.digest() == flags.digest() and len(flags.digest()) == 16
    assert validate(flags.plain()) == flags and validate(flags) == flags
    assert validate(None) == run_flags.NO_FLAGS and validate({}).canonical() == "" and not validate({})
    assert validate({"config": {"jax_enable_x64": False}}).digest() != validate({}).digest()


@pytest.mark.parametrize("raw, flag, says", [
    # Names off the list, or naming a place.
    ({"xla": {"xla_dump_to": "x"}}, "xla_dump_to", "never accepted"),
    ({"xla": {"--xla_dump_to": "/tmp/d"}}, "--xla_dump_to", "never accepted"),
    ({"xla": {"xla_dump_hlo_pass_re": ".*"}}, "xla_dump_hlo_pass_re", "never accepted"),
    ({"xla": {"xla_gpu_cuda_data_dir": "/usr"}}, "xla_gpu_cuda_data_dir", "never accepted"),
    ({"xla": {"xla_gpu_per_fusion_autotune_cache_dir": "d"}}, "xla_gpu_per_fusion_autotune_cache_dir",
     "never accepted"),
    ({"xla": {"xla_cpu_dump_path": "p"}}, "xla_cpu_dump_path", "never accepted"),
    ({"xla": {"xla_gpu_load_autotune_results_from": "f.txt"}}, "xla_gpu_load_autotune_results_from", "Unknown"),
    ({"config": {"jax_compilation_cache_dir": "/tmp/c"}}, "jax_compilation_cache_dir", "never accepted"),
    ({"config": {"jax_persistent_cache_min_entry_size_bytes": 0}}, "jax_persistent_cache_min_entry_size_bytes",
     "Unknown"),
    ({"config": {"jax_platforms": "cpu"}}, "jax_platforms", "Unknown"),
    ({"xla": {"xla_force_host_platform_device_count": 8}}, "xla_force_host_platform_device_count", "Unknown"),
    ({"xla": {"xla_bogus": True}}, "xla_bogus", "Unknown XLA flag 'xla_bogus'. Allowed: "),
    ({"config": {"jax_enable_x64 ": True}}, "jax_enable_x64 ", "Unknown"),
    ({"config": {"JAX_ENABLE_X64": True}}, "JAX_ENABLE_X64", "Unknown"),
    ({"xla": {"xla_enable_x64": True}}, "xla_enable_x64", "Unknown"),
    ({"config": {"xla_cpu_enable_fast_math": True}}, "xla_cpu_enable_fast_math", "Unknown JAX option"),
    # Paths and other flags smuggled into values.
    ({"xla": {"xla_cpu_enable_fast_math": "1 --xla_dump_to=/tmp"}}, "xla_cpu_enable_fast_math", "true or false"),
    ({"xla": {"xla_cpu_enable_fast_math": "true --xla_dump_to=/tmp"}}, "xla_cpu_enable_fast_math", "true or false"),
    ({"xla": {"xla_cpu_enable_fast_math": "true\n--xla_dump_to=/tmp"}}, "xla_cpu_enable_fast_math", "true or false"),
    ({"xla": {"xla_backend_optimization_level": "1 --xla_dump_to=/tmp"}}, "xla_backend_optimization_level",
     "integer from 0 to 3"),
    ({"xla": {"xla_backend_optimization_level": "2\x00"}}, "xla_backend_optimization_level", "integer"),
    ({"xla": {"xla_backend_optimization_level": "\uff12"}}, "xla_backend_optimization_level", "integer"),
    ({"xla": {"xla_disable_hlo_passes": "/tmp"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "=/tmp"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "../etc"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "..\\x"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "'/tmp'"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": '"/tmp"'}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "cse --xla_dump_to=/tmp"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "cse\t--xla_dump_to=x"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "cse\n"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "cse\r\n--xla_dump_to=x"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "cse\x00--xla_dump_to=x"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "tmp\u2215x"}}, "xla_disable_hlo_passes", "pass names"),  # division slash
    ({"xla": {"xla_disable_hlo_passes": "tmp\uff0fx"}}, "xla_disable_hlo_passes", "pass names"),  # fullwidth
    ({"xla": {"xla_disable_hlo_passes": "cs\u0435"}}, "xla_disable_hlo_passes", "pass names"),  # Cyrillic e
    ({"xla": {"xla_disable_hlo_passes": "a=b"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": ""}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": "cse,,dce"}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": ["cse", "/tmp"]}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": ["x"] * 33}}, "xla_disable_hlo_passes", "up to 32"),
    ({"xla": {"xla_disable_hlo_passes": "p" * 65}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_disable_hlo_passes": 5}}, "xla_disable_hlo_passes", "pass names"),
    ({"xla": {"xla_cpu_max_isa": "AVX2 --xla_dump_to=/tmp"}}, "xla_cpu_max_isa", "one of SSE4_2, AVX"),
    ({"xla": {"xla_cpu_max_isa": "avx2"}}, "xla_cpu_max_isa", "one of"),
    ({"config": {"jax_default_matmul_precision": "/tmp"}}, "jax_default_matmul_precision", "one of default"),
    ({"config": {"jax_default_matmul_precision": "highest "}}, "jax_default_matmul_precision", "one of"),
    # Out of range, or of the wrong kind.
    ({"xla": {"xla_backend_optimization_level": 4}}, "xla_backend_optimization_level", "from 0 to 3; got 4"),
    ({"xla": {"xla_backend_optimization_level": -1}}, "xla_backend_optimization_level", "from 0 to 3"),
    ({"xla": {"xla_backend_optimization_level": 1.5}}, "xla_backend_optimization_level", "integer"),
    ({"xla": {"xla_backend_optimization_level": True}}, "xla_backend_optimization_level", "integer"),
    ({"xla": {"xla_backend_optimization_level": "1e3"}}, "xla_backend_optimization_level", "integer"),
    ({"xla": {"xla_gpu_autotune_level": 5}}, "xla_gpu_autotune_level", "from 0 to 4"),
    ({"xla": {"xla_cpu_prefer_vector_width": 1024}}, "xla_cpu_prefer_vector_width", "one of 128, 256, 512"),
    ({"config": {"jax_enable_x64": 1}}, "jax_enable_x64", "true or false; got 1"),
    ({"config": {"jax_enable_x64": "True"}}, "jax_enable_x64", "true or false"),
    ({"config": {"jax_enable_x64": None}}, "jax_enable_x64", "true or false"),
    ({"config": {"jax_enable_x64": {"a": 1}}}, "jax_enable_x64", "true or false"),
    ({"config": {"jax_numpy_rank_promotion": "maybe"}}, "jax_numpy_rank_promotion", "allow, warn, raise"),
    # Malformed wholes.
    ({"xla": {"xla_cpu_enable_fast_math": True, "--xla_cpu_enable_fast_math": False}}, "xla_cpu_enable_fast_math",
     "given twice"),
    ({"xla": ["--xla_dump_to=/tmp"]}, "", "must be an object"),
    ({"xla": "--xla_dump_to=/tmp"}, "", "must be an object"),
    ({"env": {"XLA_FLAGS": "--xla_dump_to=/tmp"}}, "", "unknown fields ['env']"),
    ("--xla_dump_to=/tmp", "", "must be an object"),
    ({"xla": {"": True}}, "", "non-empty string"),
    ({"config": {f"jax_{i}": True for i in range(40)}}, "jax_0", "Unknown"),
])
def test_refused_forms_name_the_flag_and_what_is_allowed(raw: object, flag: str, says: str) -> None:
    with pytest.raises(FlagError) as refused:
        validate(raw)
    assert refused.value.flag == flag
    assert says in str(refused.value)


def _valid_value(spec: run_flags.FlagSpec) -> object:
    if spec.kind == "bool":
        return True
    if spec.kind == "int":
        return spec.low
    return spec.choices[0] if spec.choices else "algsimp"


def test_too_many_settings_are_refused() -> None:
    every = {"config": {n: _valid_value(s) for n, s in run_flags.CONFIG_SPECS.items()},
             "xla": {n: _valid_value(s) for n, s in run_flags.XLA_SPECS.items()}}
    assert len(every["config"]) + len(every["xla"]) > run_flags.MAX_SETTINGS
    with pytest.raises(FlagError, match="at most 32"):
        validate(every)


def test_no_allowed_name_reads_or_writes_a_place() -> None:
    for name in [*run_flags.XLA_SPECS, *run_flags.CONFIG_SPECS]:
        assert not run_flags.PLACE_WORDS.search(name), name
    for spec in [*run_flags.XLA_SPECS.values(), *run_flags.CONFIG_SPECS.values()]:
        assert all("/" not in choice and "." not in choice for choice in spec.choices)


def test_a_flag_this_runtimes_xla_lacks_is_refused_naming_the_runtime() -> None:
    emitters = {"xla": {"xla_cpu_use_fusion_emitters": True}}
    assert validate(emitters, "0.6.2") and validate(emitters, "0.10.2")
    for version in ("0.4.38", "0.12.0.1"):
        with pytest.raises(FlagError, match=f"not known to the XLA of JAX {version}; it needs JAX 0.6 or later "
                                            "before 0.12"):
            validate(emitters, version)
    with pytest.raises(FlagError, match="xla_cpu_use_xnnpack is not known to the XLA of JAX 0.4.38"):
        validate({"xla": {"xla_cpu_use_xnnpack": False}}, "0.4.38")
    with pytest.raises(FlagError, match="acts only on gpu, cuda, rocm, not on cpu"):
        validate({"xla": {"xla_gpu_autotune_level": 0}}, "0.10.2", "cpu")
    assert validate({"xla": {"xla_gpu_autotune_level": 0}}, "0.10.2", "gpu")
    for version in OFFERED:  # the flags every offered runtime knows
        every = {"xla": {n: _valid_value(s) for n, s in run_flags.XLA_SPECS.items() if not s.since and not s.backends}}
        assert len(validate(every, version, "cpu").xla) >= 15


def test_the_run_message_carries_flags_typed_and_refuses_bad_ones() -> None:
    frame = ('{"type":"run","id":"r1","code":"1","flags":{"config":{"jax_enable_x64":true},'
             '"xla":{"xla_disable_hlo_passes":"algsimp"}}}')
    run = bp.parse_client_message(frame, max_code_bytes=1000)
    assert isinstance(run, bp.ClientRun)
    assert run.flags == {"config": {"jax_enable_x64": True}, "xla": {"xla_disable_hlo_passes": "algsimp"}}
    assert bp.parse_client_message('{"type":"run","id":"r0","code":"1"}', max_code_bytes=1000).flags is None
    bad = '{"type":"run","id":"r2","code":"1","flags":{"xla":{"xla_dump_to":"/tmp/x"}}}'
    with pytest.raises(bp.ProtocolError) as refused:
        bp.parse_client_message(bad, max_code_bytes=1000)
    assert refused.value.run_id == "r2" and refused.value.reason == "bad_flags"
    assert "xla_dump_to" in str(refused.value) and "never accepted" in str(refused.value)


def test_flags_cross_the_worker_wire_typed_and_are_left_out_without_any() -> None:
    flags = validate({"xla": {"xla_disable_hlo_passes": "algsimp"}})
    job = wp.ServerJob(run_id="r", code="1", timeout_s=5, options=wp.JobOptions(flags=flags))
    back = wp.decode(wp.encode(job))
    assert back.options.flags == flags
    assert "flags" not in wp.encode(wp.ServerJob(run_id="r", code="1", timeout_s=5))
    # A wire may carry anything of the right shape: the worker's check refuses what is off the list.
    smuggled = wp.decode('{"type":"job","run_id":"r","code":"1","timeout_s":5,"options":{"flags":{"config":[],'
                         '"xla":[{"name":"xla_dump_to","value":"/tmp/x"}]}}}')
    with pytest.raises(FlagError, match="never accepted"):
        validate(smuggled.options.flags)
