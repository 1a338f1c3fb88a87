#pragma once
// FEDCAF_KERNEL marks a loop kernel the compiler vectorizes: cloned for
// AVX2 and for any x86-64, the clone picked at load by the CPU's features
// (ELF's ifunc). Elsewhere it is the one function the compiler makes.
// Each kernel's name must be unique in the program: clang exports the
// clones' resolver even in an anonymous namespace.

#if defined(__x86_64__) && defined(__ELF__)
#define FEDCAF_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define FEDCAF_KERNEL
#endif
