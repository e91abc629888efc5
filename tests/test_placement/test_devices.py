"""The device table and the --devices parser."""

from __future__ import annotations

import pytest

from tc_analyses.perf.devices import (DEFAULT_GPU, GPUS, LINKS, default_link, parse_devices, spec)
from tc_analyses.perf.problem import Device, PlacementError


def test_parse_named_and_default_devices() -> None:
    cpu, gpu, remote = parse_devices("cpu,cuda:0=H100,hostB:cuda:0")
    assert (cpu.name, cpu.model, cpu.host, cpu.model_is_default) == ("cpu", "CPU", "localhost", True)
    assert (gpu.name, gpu.model, gpu.host, gpu.model_is_default) == ("cuda:0", "H100", "localhost", False)
    assert gpu.memory_bytes == 80 * 10**9
    assert (remote.name, remote.model, remote.host, remote.model_is_default) == ("hostB:cuda:0", DEFAULT_GPU,
                                                                                 "hostB", True)
    assert DEFAULT_GPU == "A100"


def test_model_names_are_case_insensitive_and_cpu_cores() -> None:
    (gpu, cpu) = parse_devices("cuda:1=h200, cpu=CPU-16")
    assert gpu.model == "H200" and not gpu.model_is_default
    assert spec(cpu.model).fp32_flops == 16 * spec("CPU-1").fp32_flops
    assert spec("rtx4090").half_flops > spec("rtx4090").fp32_flops


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(PlacementError) as err:
        parse_devices("cuda:0=B9000")
    message = str(err.value)
    assert "\n" not in message and "B9000" in message
    assert all(model in message for model in GPUS)


@pytest.mark.parametrize("text", ["", "tpu:0", "cuda", "cuda:x", "cpu,cpu", "cpu=H100", "cuda:0=CPU"])
def test_bad_device_lists(text: str) -> None:
    with pytest.raises(PlacementError):
        parse_devices(text)


def test_default_links() -> None:
    cpu, a, b, remote = parse_devices("cpu,cuda:0=H100,cuda:1=H100,hostB:cuda:0")
    assert default_link(cpu, a) is LINKS["PCIe 4.0 x16"]
    assert default_link(a, b) is LINKS["NVLink 4"]
    assert default_link(a, remote) is LINKS["25GbE"]
    t4 = Device("cuda:2", "T4")
    assert default_link(a, t4) is LINKS["PCIe 4.0 x16"]
    assert LINKS["PCIe 4.0 x16"].time_ns(31_500) == 5_000 + 1_000
