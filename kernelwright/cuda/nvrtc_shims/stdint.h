// kernelwright NVRTC shim: fixed-width integer types for device code compiled without a host libc.
#pragma once
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t; typedef long long intptr_t; typedef unsigned long long uintptr_t;
typedef unsigned long size_t;
#define INT8_MAX 127
#define INT8_MIN (-128)
#define INT32_MAX 2147483647
#define INT32_MIN (-2147483647 - 1)
#define INT64_MAX 9223372036854775807LL
#define UINT32_MAX 0xffffffffu
