"""A fake ``pynvml`` for tests: the real module's constants and exception classes, with the
device functions answered from in-memory GPUs. Only the functions medic's agent calls exist,
so a call to anything else fails loudly.

Hand it to the node agent where it takes its NVML module (``medic.ingest.nvml``); set a GPU's
counters, or post an Xid with ``xid()``, and the next poll reads them as the driver's.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import pynvml


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    util: int = 97
    mem_used: int = 60 * 1024 * 1024 * 1024
    power_mw: int = 612_345
    temp: int = 61
    sm_clock: int = 1980
    reasons: int = 0
    ecc_sbe: int = 0
    ecc_dbe: int = 0
    pcie_replay: int = 0
    nvlink: dict[int, dict[int, int]] = field(default_factory=dict)
    """Active link -> NVML error counter -> count."""
    unsupported: set[str] = field(default_factory=set)
    """Names of functions that answer NVMLError_NotSupported."""


@dataclass
class Event:
    device: Any
    eventType: int
    eventData: int


class FakeNvml:
    """Stands in for the ``pynvml`` module."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.calls: Counter[str] = Counter()
        self.pending: deque[Event] = deque()
        self.initialised = False
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError", "nvmlEventType")):
                setattr(self, name, getattr(pynvml, name))

    def xid(self, index: int, code: int) -> None:
        """A Xid event on GPU ``index``, as the driver would post it."""
        self.pending.append(Event(index, pynvml.nvmlEventTypeXidCriticalError, code))

    def _gpu(self, handle: int, function: str) -> FakeGpu:
        self.calls[function] += 1
        gpu = self.gpus[handle]
        if function in gpu.unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self.gpus[handle].uuid

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.gpus[handle].name.encode()

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        if link not in self._gpu(handle, "nvmlDeviceGetNvLinkState").nvlink:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return 1

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return pynvml.c_nvmlUtilization_t(gpu=gpu.util, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        return pynvml.c_nvmlMemory_t(
            total=80 << 30, free=(80 << 30) - gpu.mem_used, used=gpu.mem_used
        )

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle, "nvmlDeviceGetTemperature").temp

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_SM
        return self._gpu(handle, "nvmlDeviceGetClockInfo").sm_clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    def nvmlDeviceGetTotalEccErrors(self, handle: int, kind: int, counter: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEccErrors")
        assert counter == pynvml.NVML_VOLATILE_ECC
        return gpu.ecc_dbe if kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else gpu.ecc_sbe

    def nvmlDeviceGetPcieReplayCounter(self, handle: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetPcieReplayCounter").pcie_replay

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: int, link: int, counter: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetNvLinkErrorCounter").nvlink[link].get(counter, 0)

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlEventSetFree(self, events: str) -> None:
        assert events == "event-set"

    def nvmlDeviceRegisterEvents(self, handle: int, types: int, events: str) -> None:
        assert types == pynvml.nvmlEventTypeXidCriticalError and events == "event-set"
        self._gpu(handle, "nvmlDeviceRegisterEvents")

    def nvmlEventSetWait_v2(self, events: str, timeout_ms: int) -> Event:
        assert timeout_ms == 0
        if not self.pending:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return self.pending.popleft()
