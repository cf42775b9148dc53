// kernelwright NVRTC shim: NVRTC provides the device math functions itself.
#pragma once
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
