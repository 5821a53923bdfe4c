// Device kernels of the CUDA backend (package kernels/cuda). `make cuda-ptx`
// compiles this file to ptx/kernels_sm80.ptx and ptx/kernels_sm90.ptx, which
// the Go package embeds and loads with cuModuleLoadData.
//
// Determinism: every output element is computed by one thread (or one warp
// whose lanes own fixed column sets, reduced by a fixed butterfly), so the
// result of a row never depends on the other rows of a launch or on the
// grid size. Arithmetic that the CPU backend rounds step by step uses the
// __f*_rn intrinsics so that nvcc does not contract it into FMAs.
//
// Ownership: paged_attention_check compares the owner tag of every page an
// attention launch reads (device array page_tags, two uint64 per page) with
// the tag the block table expects, and raises *flag on any mismatch before
// paged_attention reads anything; paged_attention checks its own pages again
// and writes nothing when the flag is up.

#include <stdint.h>
#ifndef CLOISON_HOST_EMU // hostemu.cc provides its own
#include <cuda_fp16.h>
#endif

#define WARP 32

// ---- helpers ---------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
	// Butterfly: every lane ends with the same bits (fp addition commutes).
	for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
	return v;
}

__device__ __forceinline__ float half_to_float(uint16_t h) {
	return __half2float(*reinterpret_cast<const __half *>(&h));
}

// Unaligned little-endian half at byte p (Q4_0/Q8_0 blocks are 18 or 34
// bytes: their scales are not 2-aligned).
__device__ __forceinline__ float load_half(const uint8_t *p) {
	return half_to_float((uint16_t)p[0] | ((uint16_t)p[1] << 8));
}

// Weight storage types, numbered as kernels.DType (GGML).
enum { DT_F32 = 0, DT_F16 = 1, DT_Q4_0 = 2, DT_Q8_0 = 8, DT_BF16 = 30 };

// weight returns element i of a weight row in dtype dt, with the values of
// kernels.Dequantize (float32(q)·d for block types).
__device__ __forceinline__ float weight(const uint8_t *row, int dt, long i) {
	switch (dt) {
	case DT_F32:
		return reinterpret_cast<const float *>(row)[i];
	case DT_F16:
		return half_to_float(reinterpret_cast<const uint16_t *>(row)[i]);
	case DT_BF16:
		return __uint_as_float((uint32_t)reinterpret_cast<const uint16_t *>(row)[i] << 16);
	case DT_Q8_0: {
		const uint8_t *blk = row + (i / 32) * 34;
		return __fmul_rn((float)(int8_t)blk[2 + i % 32], load_half(blk));
	}
	case DT_Q4_0: {
		const uint8_t *blk = row + (i / 32) * 18;
		int j = i % 32;
		int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
		return __fmul_rn((float)(q - 8), load_half(blk));
	}
	}
	return 0.0f;
}

// ---- matrix products ---------------------------------------------------------

// matmul: dst[r][o] = Σ_i x[r][i]·w[o][i]. One warp per weight row o and up
// to MM_ROWS activation rows: lane l owns columns l, l+32, l+64, … of every
// row, summed in that order; the 32 partial sums are combined by warp_sum.
// Weight bytes are read once per MM_ROWS rows. Grid: (ceil(out/8), ceil(rows/MM_ROWS)),
// block 256 threads (8 warps, 8 weight rows).
#define MM_ROWS 8
extern "C" __global__ void matmul(float *dst, const float *x, const uint8_t *w,
                                  int dt, int rows, int cols, int out, long row_bytes) {
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	int o = blockIdx.x * (blockDim.x / WARP) + warp;
	int r0 = blockIdx.y * MM_ROWS;
	if (o >= out) return;
	int nr = min(MM_ROWS, rows - r0);
	const uint8_t *wr = w + (long)o * row_bytes;
	float acc[MM_ROWS];
#pragma unroll
	for (int k = 0; k < MM_ROWS; k++) acc[k] = 0.0f;
	// Unrolled for memory-level parallelism; each lane still adds its
	// columns in increasing order.
#pragma unroll 4
	for (long i = lane; i < cols; i += WARP) {
		float wv = weight(wr, dt, i);
#pragma unroll
		for (int k = 0; k < MM_ROWS; k++)
			if (k < nr) acc[k] = fmaf(x[(long)(r0 + k) * cols + i], wv, acc[k]);
	}
#pragma unroll
	for (int k = 0; k < MM_ROWS; k++) {
		if (k < nr) {
			float s = warp_sum(acc[k]);
			if (lane == 0) dst[(long)(r0 + k) * out + o] = s;
		}
	}
}

// embed: dst[r] = row ids[r] of w. Grid: (rows, ceil(cols/256)).
extern "C" __global__ void embed(float *dst, const uint8_t *w, const int *ids,
                                 int dt, int cols, long row_bytes) {
	long i = (long)blockIdx.y * blockDim.x + threadIdx.x;
	if (i >= cols) return;
	int r = blockIdx.x;
	dst[(long)r * cols + i] = weight(w + (long)ids[r] * row_bytes, dt, i);
}

// ---- row-wise ops -------------------------------------------------------------

// block_sum_d sums one double per thread in a fixed tree order; every thread
// gets the result. sh has blockDim.x doubles; blockDim.x is a power of two.
__device__ double block_sum_d(double v, double *sh) {
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
		__syncthreads();
	}
	double r = sh[0];
	__syncthreads();
	return r;
}

__device__ float block_max_f(float v, float *sh) {
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
		__syncthreads();
	}
	float r = sh[0];
	__syncthreads();
	return r;
}

// rmsnorm: dst[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w; sum of squares in
// float64. One block (256 threads) per row; dst may be x.
extern "C" __global__ void rmsnorm(float *dst, const float *x, const float *w, int cols, float eps) {
	__shared__ double sh[256];
	const float *in = x + (long)blockIdx.x * cols;
	float *out = dst + (long)blockIdx.x * cols;
	double s = 0;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) s += (double)in[i] * (double)in[i];
	s = block_sum_d(s, sh);
	float scale = (float)(1.0 / sqrt(s / (double)cols + (double)eps));
	for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = __fmul_rn(__fmul_rn(in[i], scale), w[i]);
}

// rope: rotates pair i of every head of row r by pos[r]·freq[i] (freq
// computed on the host in float64, as kernels/cpu does). Grid: rows; block
// threads stride over (head, pair).
extern "C" __global__ void rope(float *x, const int *pos, const double *freq, int cols,
                                int head_dim, int half, int neox) {
	float *row = x + (long)blockIdx.x * cols;
	int heads = cols / head_dim;
	double p = (double)pos[blockIdx.x];
	for (int t = threadIdx.x; t < heads * half; t += blockDim.x) {
		int h = t / half, i = t % half;
		double sd, cd;
		sincos(p * freq[i], &sd, &cd);
		float c = (float)cd, s = (float)sd;
		int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
		float *head = row + (long)h * head_dim;
		float x0 = head[a], x1 = head[b];
		head[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
		head[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
	}
}

__device__ __forceinline__ float silu(float v) { return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v))); }

// Elementwise ops over n elements; grid-stride loops.
extern "C" __global__ void swiglu(float *dst, const float *gate, const float *up, long n) {
	for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
		dst[i] = __fmul_rn(silu(gate[i]), up[i]);
}

extern "C" __global__ void silu_op(float *dst, const float *x, long n) {
	for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
		dst[i] = silu(x[i]);
}

// add: dst = a + b; b is broadcast when b_rows == 1.
extern "C" __global__ void add(float *dst, const float *a, const float *b, long n, int cols, int b_rows) {
	for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
		dst[i] = __fadd_rn(a[i], b[b_rows == 1 ? i % cols : i]);
}

// softmax of each row in place; one block (256 threads) per row, the
// normaliser summed in float64.
extern "C" __global__ void softmax(float *x, int cols) {
	__shared__ double shd[256];
	__shared__ float shf[256];
	float *row = x + (long)blockIdx.x * cols;
	float m = -INFINITY;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, row[i]);
	m = block_max_f(m, shf);
	double s = 0;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) {
		float e = expf(__fsub_rn(row[i], m));
		row[i] = e;
		s += (double)e;
	}
	s = block_sum_d(s, shd);
	float inv = (float)(1.0 / s);
	for (int i = threadIdx.x; i < cols; i += blockDim.x) row[i] = __fmul_rn(row[i], inv);
}

// ---- KV arena ------------------------------------------------------------------

// write_kv: row j of k and v (each row_len floats) goes to arena offsets
// off[j] (K) and off[j] + kv_len (V). Grid: rows.
extern "C" __global__ void write_kv(float *arena, const float *k, const float *v, const long *off,
                                    int row_len, long kv_len) {
	long o = off[blockIdx.x];
	const float *kr = k + (long)blockIdx.x * row_len;
	const float *vr = v + (long)blockIdx.x * row_len;
	for (int i = threadIdx.x; i < row_len; i += blockDim.x) {
		arena[o + i] = kr[i];
		arena[o + kv_len + i] = vr[i];
	}
}

// tag_ok compares page's device tag with an expected one; the zero tag (no
// owner) never matches.
__device__ __forceinline__ bool tag_ok(const unsigned long long *page_tags, int page,
                                       const unsigned long long *want) {
	unsigned long long w0 = want[0], w1 = want[1];
	return (w0 | w1) != 0 && page_tags[2 * page] == w0 && page_tags[2 * page + 1] == w1;
}

// paged_attention_check: entry e of the flat page list (pages[e], want
// tags want[2e], want[2e+1]) is compared with the device tag array. On a
// mismatch *flag becomes 1 and bad[0] the lowest mismatching entry.
extern "C" __global__ void paged_attention_check(const unsigned long long *page_tags, const int *pages,
                                                 const unsigned long long *want, int n, int *flag, int *bad) {
	int e = blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= n) return;
	if (!tag_ok(page_tags, pages[e], want + 2 * e)) {
		atomicExch(flag, 1);
		atomicMin(bad, e);
	}
}

// paged_attention: causal grouped-query attention. Block (query row r,
// query head h), ATT_WARPS warps. rowinfo[2r] is the first entry of r's
// table in the flat page list, rowinfo[2r+1] its position (it reads
// positions 0…pos). Warp w handles positions w, w+ATT_WARPS, … with an
// online softmax; lane l owns dims l, l+32, … (head_dim ≤ 32·ATT_DIMS);
// the warps' states are merged in warp order. Unless check is 0
// (Options.UnsafeSkipOwnershipChecks), the block compares the tags of its
// pages again before reading any, and writes nothing if one mismatches or
// *flag is set.
#define ATT_WARPS 4
#define ATT_DIMS 8
extern "C" __global__ void paged_attention(float *out, const float *q, const float *arena,
                                           const unsigned long long *page_tags, const int *pages,
                                           const unsigned long long *want, const int *rowinfo,
                                           const int *qrow, int q_cols, int head_dim, int group,
                                           int page_tokens, long page_len, long kv_len, int kv_row,
                                           int layer, float scale, int check, int *flag) {
	__shared__ float sm[ATT_WARPS], ss[ATT_WARPS];
	__shared__ float sacc[ATT_WARPS][32 * ATT_DIMS];
	__shared__ int sbad;
	int r = blockIdx.x, h = blockIdx.y;
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	int first = rowinfo[2 * r], pos = rowinfo[2 * r + 1];
	int n = pos + 1;
	int npages = (n + page_tokens - 1) / page_tokens;
	if (threadIdx.x == 0) sbad = check ? *(volatile int *)flag : 0;
	__syncthreads();
	for (int i = threadIdx.x; check && i < npages; i += blockDim.x)
		if (!tag_ok(page_tags, pages[first + i], want + 2 * (first + i))) {
			sbad = 1;
			atomicExch(flag, 1);
		}
	__syncthreads();
	if (sbad) return;

	int kh = h / group;
	const float *qh = q + (long)qrow[r] * q_cols + (long)h * head_dim;
	float qv[ATT_DIMS], acc[ATT_DIMS];
#pragma unroll
	for (int j = 0; j < ATT_DIMS; j++) {
		int d = lane + 32 * j;
		qv[j] = d < head_dim ? qh[d] : 0.0f;
		acc[j] = 0.0f;
	}
	float m = -INFINITY, s = 0.0f;
	for (int p = warp; p < n; p += ATT_WARPS) {
		long base = (long)pages[first + p / page_tokens] * page_len + (long)(2 * layer) * kv_len +
		            (long)(p % page_tokens) * kv_row + (long)kh * head_dim;
		const float *key = arena + base;
		const float *val = arena + base + kv_len;
		float dot = 0.0f;
#pragma unroll
		for (int j = 0; j < ATT_DIMS; j++) {
			int d = lane + 32 * j;
			if (d < head_dim) dot = fmaf(qv[j], key[d], dot);
		}
		float sc = __fmul_rn(warp_sum(dot), scale);
		float mn = fmaxf(m, sc);
		float corr = expf(m - mn); // 0 on the first position (m = −∞)
		float e = expf(sc - mn);
		s = s * corr + e;
#pragma unroll
		for (int j = 0; j < ATT_DIMS; j++) {
			int d = lane + 32 * j;
			acc[j] = acc[j] * corr + (d < head_dim ? e * val[d] : 0.0f);
		}
		m = mn;
	}
	if (lane == 0) {
		sm[warp] = m;
		ss[warp] = s;
	}
#pragma unroll
	for (int j = 0; j < ATT_DIMS; j++) sacc[warp][lane + 32 * j] = acc[j];
	__syncthreads();
	if (warp != 0) return;
	float M = -INFINITY;
	for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, sm[w]);
	float S = 0.0f;
	float o[ATT_DIMS];
#pragma unroll
	for (int j = 0; j < ATT_DIMS; j++) o[j] = 0.0f;
	for (int w = 0; w < ATT_WARPS; w++) {
		if (sm[w] == -INFINITY) continue; // a warp that saw no position
		float c = expf(sm[w] - M);
		S += ss[w] * c;
#pragma unroll
		for (int j = 0; j < ATT_DIMS; j++) o[j] += sacc[w][lane + 32 * j] * c;
	}
	float inv = 1.0f / S;
	float *oh = out + (long)qrow[r] * q_cols + (long)h * head_dim;
#pragma unroll
	for (int j = 0; j < ATT_DIMS; j++) {
		int d = lane + 32 * j;
		if (d < head_dim) oh[d] = o[j] * inv;
	}
}
