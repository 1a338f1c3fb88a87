#pragma once
// FEDCAF_KERNEL marks a loop kernel the compiler vectorizes: cloned for
// AVX2 and for any x86-64, the clone picked at load by the CPU's features.

#define FEDCAF_KERNEL __attribute__((target_clones("avx2", "default")))
