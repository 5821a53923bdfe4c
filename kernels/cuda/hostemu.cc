//go:build cudaemu

// hostemu.cc compiles kernels.cu itself — the CUDA C, not a port — as host
// C++ and runs its kernels on the CPU, one fiber per CUDA thread, so that
// `go test -tags cudaemu ./kernels/cuda` (make cuda-emu-test) checks the
// kernel source with the conformance suite on a machine without a GPU.
//
// What the shim models: threadIdx/blockIdx/blockDim/gridDim per fiber;
// blocks run one after another, the threads of a block cooperatively
// (ucontext fibers on one OS thread), so __shared__ variables (function
// statics here) are per block; __syncthreads is a barrier of the block's
// live threads; __shfl_xor_sync exchanges values among the 32 lanes of a
// warp (a warp barrier with double-buffered slots); atomics are plain
// operations (one OS thread). The __f*_rn intrinsics are plain IEEE
// operations (fp-contract off); fmaf is fused, expf and
// sincos are glibc's (the GPU's differ by an ulp or so). What it cannot
// model: memory ordering between blocks, the GPU's own math library, and
// anything of the driver; timing means nothing.

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

namespace {

struct dim3 {
	unsigned int x, y, z;
};

}  // namespace

// The CUDA built-in variables: the scheduler sets them before resuming a
// fiber.
static dim3 threadIdx, blockIdx, blockDim, gridDim;

// No contraction of a*b+c into FMAs (the kernels use __f*_rn where it matters).
#pragma GCC optimize("fp-contract=off")

#define CLOISON_HOST_EMU 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct __half {
	uint16_t x;
};

static inline float __half2float(__half h) {
	uint32_t sign = (uint32_t)(h.x >> 15) << 31, exp = (h.x >> 10) & 0x1f, mant = h.x & 0x3ff, bits;
	if (exp == 0x1f) {
		bits = sign | 0xffu << 23 | mant << 13;
	} else if (exp == 0) {
		float f = ldexpf((float)mant, -24);
		return sign ? -f : f;
	} else {
		bits = sign | (exp + 127 - 15) << 23 | mant << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static inline float __uint_as_float(uint32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline int min(int a, int b) { return a < b ? a : b; }

static inline int atomicExch(int *p, int v) {
	int old = *p;
	*p = v;
	return old;
}

static inline int atomicMin(int *p, int v) {
	int old = *p;
	if (v < old) *p = v;
	return old;
}

static void __syncthreads();
static float __shfl_xor_sync(unsigned mask, float v, int lane_mask);

#include "kernels.cu"

// ---- the fiber scheduler ------------------------------------------------------

namespace {

const size_t kStack = 128 << 10;

struct fiber {
	ucontext_t ctx;
	dim3 tid;
	bool done;
	std::vector<char> stack;
};

struct block_state {
	std::vector<fiber> fibers;
	ucontext_t sched;
	int cur;
	void (*body)(void *);
	void *arg;
	// __syncthreads
	int arrived;
	unsigned long gen;
	// __shfl_xor_sync, per warp
	std::vector<int> warp_arrived;
	std::vector<unsigned long> warp_gen;
	std::vector<float> slots;  // [warp][parity][lane]
	bool deadlock;
	int waiting;  // fibers blocked in a barrier since the last release
};

block_state B;

int live() {
	int n = 0;
	for (auto &f : B.fibers) n += !f.done;
	return n;
}

void yield() {
	fiber &f = B.fibers[B.cur];
	swapcontext(&f.ctx, &B.sched);
}

void trampoline() {
	B.body(B.arg);
	B.fibers[B.cur].done = true;
	// Returning resumes uc_link (the scheduler).
}

}  // namespace

static void __syncthreads() {
	unsigned long g = B.gen;
	if (++B.arrived == live()) {
		B.arrived = 0;
		B.gen++;
		B.waiting = 0;
		return;
	}
	B.waiting++;
	while (B.gen == g && !B.deadlock) yield();
}

static float __shfl_xor_sync(unsigned, float v, int lane_mask) {
	int t = B.cur, w = t / 32, lane = t % 32;
	unsigned long g = B.warp_gen[w];
	float *slot = &B.slots[(w * 2 + g % 2) * 32];
	slot[lane] = v;
	if (++B.warp_arrived[w] == 32) {
		B.warp_arrived[w] = 0;
		B.warp_gen[w]++;
		B.waiting = 0;
	} else {
		B.waiting++;
		while (B.warp_gen[w] == g && !B.deadlock) yield();
	}
	return slot[lane ^ lane_mask];
}

// run executes body for every thread of a grid×block launch. It returns
// false if a block deadlocked (a barrier that not every thread reaches).
static bool run(dim3 grid, unsigned block, void (*body)(void *), void *arg) {
	gridDim = grid;
	blockDim = dim3{block, 1, 1};
	B.body = body;
	B.arg = arg;
	B.fibers.resize(block);
	for (auto &f : B.fibers)
		if (f.stack.size() != kStack) f.stack.resize(kStack);
	unsigned warps = (block + 31) / 32;
	for (unsigned bz = 0; bz < grid.z; bz++)
		for (unsigned by = 0; by < grid.y; by++)
			for (unsigned bx = 0; bx < grid.x; bx++) {
				blockIdx = dim3{bx, by, bz};
				B.arrived = 0;
				B.gen = 0;
				B.warp_arrived.assign(warps, 0);
				B.warp_gen.assign(warps, 0);
				B.slots.assign(warps * 2 * 32, 0.0f);
				B.deadlock = false;
				B.waiting = 0;
				for (unsigned t = 0; t < block; t++) {
					fiber &f = B.fibers[t];
					f.done = false;
					f.tid = dim3{t, 0, 0};
					getcontext(&f.ctx);
					f.ctx.uc_stack.ss_sp = f.stack.data();
					f.ctx.uc_stack.ss_size = f.stack.size();
					f.ctx.uc_link = &B.sched;
					makecontext(&f.ctx, trampoline, 0);
				}
				for (;;) {
					int n = live();
					if (n == 0) break;
					if (B.waiting >= n) B.deadlock = true;  // everyone blocked, nobody released
					for (unsigned t = 0; t < block; t++) {
						if (B.fibers[t].done) continue;
						B.cur = t;
						threadIdx = B.fibers[t].tid;
						swapcontext(&B.sched, &B.fibers[t].ctx);
					}
					if (B.deadlock) {
						// Let every fiber run to its end (barriers now return).
						continue;
					}
				}
				if (B.deadlock) return false;
			}
	return true;
}

// ---- launch: kernels.cu's entry points by name -------------------------------

namespace {

struct call {
	const char *name;
	const uint64_t *a;
};

inline float F(uint64_t v) { return __uint_as_float((uint32_t)v); }
inline int I(uint64_t v) { return (int)(int32_t)(uint32_t)v; }
inline long L(uint64_t v) { return (long)v; }
template <class T> inline T *P(uint64_t v) { return (T *)(uintptr_t)v; }

void dispatch(void *arg) {
	const call *c = (const call *)arg;
	const uint64_t *a = c->a;
	const char *n = c->name;
	if (!strcmp(n, "matmul"))
		matmul(P<float>(a[0]), P<const float>(a[1]), P<const uint8_t>(a[2]), I(a[3]), I(a[4]), I(a[5]), I(a[6]), L(a[7]));
	else if (!strcmp(n, "embed"))
		embed(P<float>(a[0]), P<const uint8_t>(a[1]), P<const int>(a[2]), I(a[3]), I(a[4]), L(a[5]));
	else if (!strcmp(n, "rmsnorm"))
		rmsnorm(P<float>(a[0]), P<const float>(a[1]), P<const float>(a[2]), I(a[3]), F(a[4]));
	else if (!strcmp(n, "rope"))
		rope(P<float>(a[0]), P<const int>(a[1]), P<const double>(a[2]), I(a[3]), I(a[4]), I(a[5]), I(a[6]));
	else if (!strcmp(n, "swiglu"))
		swiglu(P<float>(a[0]), P<const float>(a[1]), P<const float>(a[2]), L(a[3]));
	else if (!strcmp(n, "silu_op"))
		silu_op(P<float>(a[0]), P<const float>(a[1]), L(a[2]));
	else if (!strcmp(n, "add"))
		add(P<float>(a[0]), P<const float>(a[1]), P<const float>(a[2]), L(a[3]), I(a[4]), I(a[5]));
	else if (!strcmp(n, "softmax"))
		softmax(P<float>(a[0]), I(a[1]));
	else if (!strcmp(n, "write_kv"))
		write_kv(P<float>(a[0]), P<const float>(a[1]), P<const float>(a[2]), P<const long>(a[3]), I(a[4]), L(a[5]));
	else if (!strcmp(n, "paged_attention_check"))
		paged_attention_check(P<const unsigned long long>(a[0]), P<const int>(a[1]), P<const unsigned long long>(a[2]),
		                      I(a[3]), P<int>(a[4]), P<int>(a[5]));
	else if (!strcmp(n, "paged_attention"))
		paged_attention(P<float>(a[0]), P<const float>(a[1]), P<const float>(a[2]), P<const unsigned long long>(a[3]),
		                P<const int>(a[4]), P<const unsigned long long>(a[5]), P<const int>(a[6]), P<const int>(a[7]),
		                I(a[8]), I(a[9]), I(a[10]), I(a[11]), L(a[12]), L(a[13]), I(a[14]), I(a[15]), F(a[16]), I(a[17]),
		                P<int>(a[18]));
}

const struct {
	const char *name;
	int args;
} kKernels[] = {
    {"matmul", 8},   {"embed", 6},    {"rmsnorm", 5},  {"rope", 7},
    {"swiglu", 4},   {"silu_op", 3},  {"add", 6},      {"softmax", 2},
    {"write_kv", 6}, {"paged_attention_check", 6},     {"paged_attention", 19},
};

}  // namespace

// cloison_emu_launch runs kernel name of kernels.cu. It returns 0, or -1
// for an unknown kernel or argument count, -2 for a deadlocked block.
extern "C" int cloison_emu_launch(const char *name, int gx, int gy, int gz, int block, const uint64_t *args, int nargs) {
	bool known = false;
	for (auto &k : kKernels)
		if (!strcmp(k.name, name)) known = k.args == nargs;
	if (!known) return -1;
	call c{name, args};
	return run(dim3{(unsigned)gx, (unsigned)gy, (unsigned)gz}, (unsigned)block, dispatch, &c) ? 0 : -2;
}
