// QS_ISA_NAMESPACE: an inline namespace named after the instruction set a file is compiled for.
//
// Inline functions in headers that are included both from generic files and from *_avx2.cc files
// (compiled with -mavx2 -mfma -mf16c) would otherwise be one function under the ODR: the linker
// keeps one copy, possibly the AVX2 one, and generic callers would run AVX2 code on any CPU.
// Wrapping such helpers in `inline namespace QS_ISA_NAMESPACE { ... }` gives each instruction set its
// own mangled names, so every file calls the copy compiled with its own flags.
#pragma once

#if defined(__AVX512F__)
#define QS_ISA_NAMESPACE isa_avx512
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QS_ISA_NAMESPACE isa_avx2
#else
#define QS_ISA_NAMESPACE isa_generic
#endif
