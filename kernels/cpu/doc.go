// Package cpu is the pure-Go kernels.Backend, registered as "cpu": the
// default backend and the oracle other backends are compared with. It builds
// with CGO_ENABLED=0 on every platform Go supports.
//
// Guarantees:
//
//   - Deterministic and batch-invariant: every output element has one fixed
//     reduction order (dot.go), the same in every kernel shape, and is
//     computed by exactly one task; a row's result is bit-identical whatever
//     else is in the batch and whatever the thread count.
//   - All cores: a fixed pool of worker goroutines (Options.Threads, default
//     GOMAXPROCS) takes tasks from an atomic counter; products are split
//     into (64-row activation tile × 24-row weight block) tasks, attention
//     into (query row × query head) tasks, row-wise ops into row chunks. The
//     calling goroutine works too, so concurrent callers cannot deadlock.
//   - Decode (one activation row) reads every weight byte once, decoding
//     Q8_0, F16 and BF16 in registers; prefill decodes a weight block to
//     float32 once per task and reuses it for 64 activation rows.
//   - Weights stay where the caller put them (a memory-mapped GGUF file):
//     aligned F32, F16 and BF16 data are viewed in place, block types read
//     in place.
//   - The arena keeps a tag and per-layer fill count for every page and
//     checks them before every read (kernels.Arena).
//
// Built with GOEXPERIMENT=simd on amd64 with AVX2 and FMA, the matrix and
// attention dot products use vector kernels (dot_simd.go) with their own
// fixed order, and Q8_0 and Q4_K products multiply int8 by int8 (VPMADDUBSW)
// after quantizing each activation row to Q8 blocks, as llama.cpp does
// (within the conformance tolerance for those types). The two builds are not bit-identical to each other;
// each is deterministic and batch-invariant. The default build never imports
// simd/archsimd.
//
// Driving loop: see package kernels.
package cpu
