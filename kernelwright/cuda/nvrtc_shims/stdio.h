// kernelwright NVRTC shim: host-only header, empty for device code.
#pragma once
