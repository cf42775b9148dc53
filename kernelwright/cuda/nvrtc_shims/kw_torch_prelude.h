// kernelwright NVRTC shim: what torch/extension.h makes visible to device code.
#pragma once
#include <stdint.h>
#include <cstdint>
#include <math.h>
#include <float.h>
#include <limits.h>
#include <algorithm>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
