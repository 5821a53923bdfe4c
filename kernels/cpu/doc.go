// Package cpu is the CPU kernels.Backend, registered as "cpu": the default
// backend and the oracle other backends are compared with. It builds with
// CGO_ENABLED=0 on every platform Go supports (vector kernels are Go
// assembly, amd64 and arm64).
//
// Kernel paths (path.go): each backend runs one set of matrix and attention
// kernels, chosen at open from the CPU's features (golang.org/x/sys/cpu):
// avx512 (AVX-512 F/BW/VL; Q8_0 with VPDPBUSD, in the quad order of exact
// block sums, when AVX512_VNNI is present),
// else avx2 (AVX2, FMA, F16C) on amd64; neon (ASIMD) on arm64, its Q8_0
// kernel with SDOT where the CPU has ASIMDDP, else SMULL/SADALP (the same
// block integers, the same bits); else generic (pure Go, every platform).
// On amd64 Linux with AMX (AMX-TILE and AMX-INT8, once the OS granted the
// tile state) the default is amx: avx512 with every Q8_0 and Q4_K product
// in its own order on AMX tiles (below). CLOISON_CPU=generic|avx2|avx512|amx|neon
// forces one (avx512 on an AMX machine: the VNNI kernels, in the quad order);
// New refuses (ErrPath, code invalid) an unknown name or a path the CPU
// lacks rather than falling back.
//
// Backend.Path reports the path in use; NewWithPath opens on a given one.
//
// The neon path (dot_arm64.go, dot_arm64.s; instructions the Go assembler
// lacks are WORD-encoded there) has 4-lane F32 dot products, F16 (FCVTL)
// and BF16 (SHLL #16) converted in registers, row conversions for decode
// batches and prefill blocks, a 4×4 F32 prefill tile, and Q8_0, Q4_0, Q4_K
// and Q6_K as int8×int8 on quantized activations, SDOT or SMULL/SADALP
// (the same integers: the same bits); Q4_0, Q4_K and Q6_K one row at a
// time (no prefill tile yet; the k-quant scales are applied in Go), and
// attention uses the generic axpy and exponential. It is tested under
// qemu-aarch64 only (make arm64-check, part of make test: the whole
// package, TestConformance on generic and neon, with qemu's "max" CPU and
// with cortex-a53, which lacks ASIMDDP); no figure was measured on arm64
// hardware.
//
// Guarantees:
//
//   - Deterministic and batch-invariant: every output element has one fixed
//     reduction order (dot.go), the same in every kernel shape, and is
//     computed by exactly one task; a row's result is bit-identical whatever
//     else is in the batch and whatever the thread count.
//   - All cores: a fixed pool of worker goroutines (Options.Threads, default
//     GOMAXPROCS) takes tasks from an atomic counter; products are split
//     into (64-row activation tile × 24-row weight block; 48 on amx)
//     tasks — a product of at most 3 rows whose weights have a row kernel
//     into 4 contiguous chunks per thread instead, so that each thread
//     reads one long stream (matmul.go, decodeRows) — attention
//     into (span × kv head × 8 query rows) tasks, row-wise ops into row
//     chunks. The
//     calling goroutine works too, so concurrent callers cannot deadlock.
//     Idle workers poll for the next loop for up to 20 µs before they
//     park (workers.go, spinFor): waking a parked goroutine costs more
//     than a decode step's loop.
//   - Decode (one activation row) reads every weight byte once, decoding
//     Q8_0, F16 and BF16 in registers; prefill decodes a weight block to
//     float32 once per task and reuses it for 64 activation rows (on
//     avx512, F16 and BF16 tiles read their weights in place, below). A decode
//     step of several sequences (the engine batches them into one Forward)
//     is a product of that many rows: each weight block is read once for
//     all of them. F16 and BF16 blocks of such a product are converted with
//     VCVTPH2PS / a shift (halfrow_amd64.go; a table load per weight cost
//     more than 16 rows of products), on avx512 after the tiles of the
//     block before prefetched them (dot4x4pfAVX512), and a decode product allocates
//     nothing per task (TestDecodeAllocsPerTask).
//   - One-row (decode) products are bound by how the weight stream is
//     read, not by instructions. F16 on avx512 reads a task's rows one
//     after the other in one call (f16rowsAVX512: one sequential stream):
//     8 layers d=768, 1 thread, AMD EPYC with AVX-512, 145–148 tok/s against
//     81–82 for four or eight interleaved rows (rows of 1.5 KB: each
//     interleaved stream ends before the prefetcher runs ahead; on rows of
//     4 KB, BenchmarkMatVec, eight interleaved rows stream faster, so
//     judge by the model, cloisonctl bench). On Intel CPUs (the vendor
//     from CPUID at start, f16Streams) the task's rows go two at a
//     time instead, row i beside row i+rows/2, each stream prefetched 4 KB
//     ahead (f16rows2AVX512, the same bits): one stream read about 10 GB/s
//     there whatever the layout (throwaway kernels swept over 128 MB of
//     rows of 768–8960, medians per CPU second: two or four adjacent rows
//     9–11 GB/s, prefetch alone 11–13, two streams alone 12–14, two
//     prefetched streams 15–19). Intel Xeon (Sapphire Rapids class, 2
//     vCPUs, load 3.2–4.4), 1 thread, prompt 128, 63 decode steps, F16 KV,
//     old build, new build and llama.cpp's native llama-bench alternated,
//     3 rounds: 8 layers d=768 82–90 → 152–182 tok/cpu-s (wall 122–178
//     tok/s against llama-bench's 75–135; at load 5.9–7.0, 76–78 →
//     101–108, wall 40–75 against 43–61); d=1536 GQA (FFN 8960,
//     vocabulary 32,000) 13.0–13.3 → 17.0–17.7 tok/cpu-s (wall 12.8–17.3
//     against 10.6–13.6). BF16 the same on Intel (bf16rows2AVX512, the
//     bits of bf16dot4AVX512; before, four interleaved rows a call):
//     d=768 74–81 → 139–176 tok/cpu-s (load 8.1–8.5; wall 89–166 against
//     llama-bench's 55–87 tok/s), d=1536 GQA 13.3–13.7 → 17.2–17.5
//     (load 6.6–8.4; wall 9.3–12.1 against 6.8–8.7). On AMD EPYC Zen 5
//     (family 26, 2 vCPUs) two streams gain nothing on the d=768 model
//     (176–202 against 177–179 tok/s) but 24.3–25.6 against 16.1–20.7
//     tok/s on the d=1536 GQA model (rows of 3 and 18 KB, 944 MB of
//     weights). On Zen 4 (family 25) the prefetching two streams lost to
//     one, the two without prefetching gain (d=1536 GQA 24 → 27 tok/s at
//     1 thread, 33 → 35 at 2; d=768 even at 1, 242 → 255–265 at 2), so
//     F16 took two streams on Intel and from Zen 4 on,
//     prefetched on Intel and Zen 5 only (rowPrefetch). On an Intel Xeon
//     of family 6 model 207 (avx512) four streams (f16rows4AVX512, rows
//     i, i+q, i+2q, i+3q of a task's 4q, the same bits) read faster than
//     two at two threads: 8 layers d=1536 GQA decode 28.8–29.3 → 31.0–32.1
//     tok/s alternated with llama-bench's 30.8–31.5 (1 thread 15.6–16.2 →
//     16.2–17.5 against 15.7–16.0; a 293 MB matrix streamed at 13–14 GB/s
//     either way at one thread), as llama.cpp's tinyBLAS reads four rows at
//     a time: Intel takes four (f16Streams). BF16 takes the two streams on every avx512 CPU
//     (Zen 5: 127–131 → 159–184 tok/s against four interleaved rows),
//     the activation row rounded to BF16 once a call (vbf16dpRows; the
//     kernel had rounded it again for every row pair: Zen 4, d=768, 1
//     thread, 152–161 → 180–195 tok/s), prefetched 4 KB ahead on Intel
//     and Zen 5 only (rowPrefetch; Zen 4 188–204 → 203–215 without). Q8_0 with VNNI
//     does the same (q8quadRows, the activation blocks' −128·Σq lanes
//     computed once per row, q8Corr; its lanes'-order predecessor read 69–161
//     against 49–51 tok/s for eight interleaved rows at load ≈ 10, sixteen
//     rows, two to a zmm, gained only 5–15%, two interleaved rows lost):
//     eight blocks' exact sums a step (VPDPBUSD lanes, a VPHADDD tree),
//     their scales by VPINSRW (a gather of them stalled the weight stream),
//     and two fused multiply-adds on a register of four accumulators, the
//     quad order's (q8blk_amd64.go). The amx order's one accumulator makes
//     a row a chain of one fused multiply-add a block at 4 cycles each:
//     on Zen 4 (family 25, 1 thread) its kernel (q8rowsBlk) streamed 23
//     GB/s of weights in cache and 21 from memory, the lanes' order's 31
//     and 23–25, the quad order's 46–48 and 30–31; buffering 8 rows' block
//     sums to run their chains in one register's lanes instead ran 29–37
//     in cache but 12–15 from memory (the buffer's stores and gathers cut
//     the loads the core keeps in flight). Q4_K reads every row of
//     the task's block in one call (q4krowsBlk, below: a zmm of a
//     chunk's low and high nibbles against 64 contiguous activations,
//     VPDPWSSD with the sub-block scales VPERMW'd into place). Q6_K likewise
//     (q6krowsVNNI: a zmm holds two of q6kdotAVX2's 32-value chunks, the
//     6-bit quants assembled with VPSLLVW/VPSRLVW and VPTERNLOGD, VPDPWSSD
//     with the VPERMW'd sub-block scales; about a quarter of the one-row
//     AVX2 kernel's instructions): Intel Xeon (Sapphire Rapids class, 2
//     vCPUs, load 4.9–6.2), 1 thread, old build, new build and llama-bench
//     alternated, 3 rounds: d=768 106–143 → 160–182 tok/cpu-s (wall 77–92
//     against llama-bench's 53–74 tok/s), d=1536 GQA 17.0–17.2 → 22.6–23.3
//     tok/cpu-s (wall 10.3–15.4 against 14.0–14.9); not measured on AMD.
//     On Intel both k-quant row kernels prefetch each super-block's lines
//     2 KB ahead (kqPrefetch; 4 KB gained less): load 5.8–9.7, the build
//     before ÷ after ÷ llama-bench alternated, 3 rounds, tok/cpu-s: Q4_K
//     d=1536 25.0 → 35.4–36.0 (wall 22–34 against llama-bench's 21–25
//     tok/s), d=768 308–380 → 410–446 (wall 178–278 against 164–215);
//     Q6_K d=1536 22.3–23.3 → 27.3–27.8 (wall 11.7–13.3 against 9.0–10.9),
//     d=768 262–342 → 383–439 (wall 187–436 against 111–272). On AMD
//     from Zen 5 (family 26) on they prefetch 4 KB ahead: there one row
//     kernel streaming a Q4_K matrix from memory read 25 GB/s without
//     it, 29–31 with 4–8 KB, and 2-thread decode of the d=1536 GQA models
//     gained 14–15% (Q4_K 150–155 → 169–181 tok/s, Q6_K 114–130 →
//     133–144; alternated). Elsewhere they do not prefetch (unmeasured).
//     The distance's sign picks the cache level (prefetch_amd64.h):
//     positive into L1 (PREFETCHT0), negative into L2 (PREFETCHT2). On
//     an Intel Xeon of family 6 model 167 (AMX, AVX512-FP16, 2 MB L2 a
//     core; one core reads 15 GB/s from memory) L1 prefetches held the
//     core's few line fill buffers and L2 ones did not, so on Intel the
//     k-quant row kernels (kqPrefetch, kqPrefetchAVX2) and the Q8_0 row
//     kernels (q8Prefetch; amx's q8rowsBlk now prefetches too) prefetch
//     4 KB ahead into L2: 8 layers d=1536 GQA decode, 1 thread,
//     alternated, Q4_K 36–39 → 43–47 tok/s (2 threads 64–66 → 73–75),
//     Q6_K 28 → 32–33 (2 threads 48 → 56), Q8_0 19 → 23–24 (21 into
//     L1; 2 threads 35 → 43), d=768 Q8_0 164–186 → 290–297; Q4_K with
//     PREFETCHNTA as without a prefetch (28). The avx2 kernels on the same CPU
//     (CLOISON_CPU=avx2): Q4_K 35 → 40–41, Q6_K 25 → 29–30. F16 decode
//     did not change (it reads at the core's 15 GB/s already).
//     With AVX512_VBMI the Q4_K row kernel takes a row's super-blocks
//     two at a time (q4krowsPairBlk): both super-blocks' 6-bit scales and
//     minimums unpacked in one ymm (VPSRLVD, masks), the sub-block scale
//     words picked by VPERMB with zero-masking, their isum and msum
//     reduced together (four sums in one zmm's chunks), d·d_x and
//     dmin·d_x of both in one multiply, then the four float steps in the
//     one-super-block kernel's order — the same bits; an odd last
//     super-block runs that kernel's body. In cache 33 → 39 GB/s of
//     weights; d=768 and d=1536 GQA Q4_K decode at 1 thread +6–10%
//     (Zen 5, alternated). Pairing two rows instead (a super-block of
//     each) ran 43 GB/s in cache but a third as fast from memory: the
//     two interleaved streams defeat the prefetchers. On Zen 4 (family
//     25 with AVX-512: zmm at half width) the one-row kernels are bound
//     by their instructions, 18–20 GB/s of weights in cache and from
//     memory alike, so Q4_K decode takes four rows at a time there
//     (q4krows4Blk, q4kFour): a row in each 128-bit lane of a zmm, the
//     four rows' 6-bit scales and minimums unpacked together by VPSHUFB
//     and masks, each 64-value chunk's nibbles against the activations'
//     16 bytes broadcast to every lane (VPDPBUSD into a sub-block's exact
//     sums; the rows' 64-byte pieces loaded whole and transposed by lanes,
//     cheaper there than sixteen 16-byte loads into lanes: +8–14% in
//     cache), packed to words, times the sub-blocks' scales by one
//     VPDPWSSD a chunk, the lanes' sums and
//     the float steps of the four rows in one register — the same bits,
//     a third of the instructions a row. Rows of a few KB read four at a
//     time are too short a stream for the hardware prefetchers (8.5 GB/s
//     from memory), so each step prefetches the next group's bytes in
//     memory order (24.7 GB/s; in cache 23–25): d=768 Q4_K decode at 1
//     thread 456 → 526–541 tok/s (llama.cpp 528–529), d=1536 GQA 72 → 79–80
//     (llama.cpp 87–88), alternated. Zen 4 reads one, eight or sixteen
//     long streams at 27–28 GB/s a core, two at 19, four at 25 (a
//     loop of loads alone). Even so, gathering four rows' 16 bytes into
//     a register's lanes took a third of the kernel's time (the same
//     instructions reading one row's 64 bytes ran 31–35 GB/s in cache
//     against 23–26), so there every Q4_K matrix keeps a copy of
//     its rows interleaved four at a time, made by its first product
//     (q4kx.go, llama.cpp's REPACK idea: per group and super-block nine
//     64-byte pieces, piece j the four rows' bytes 16j…16j+15): q4krows4X reads each register by one aligned
//     load and a task's groups as one stream, and the VNNI prefill tile
//     reads the same layout in place (q4kvnniTileX: the tile's body in
//     q4kvnnitile_amd64.h, its weight offsets mapped through W(o); blocks
//     that are not whole groups copied out by q4kDeint) — the same bits,
//     the original bytes read once, by that first product (the copy runs
//     at about 1.7 GB/s of weights, once). d=1536 GQA Q4_K (Zen 4, family 25 model 17, alternated):
//     decode 67–69 → 81–91 tok/s at 1 thread, 97–99 → 110–115 at 2;
//     prefill of 128 tokens 351–379 → 375–391 and 595–701 → 682–727.
//     Reading the interleaved copy into a scratch for the unchanged tile
//     instead cost prefill 5–15% (the copy waits on memory the tile's own
//     prefetch had hidden).
//     Software prefetch slowed both Q8_0 and F16 on the avx512 path of
//     AMD EPYC (Zen 3/4) in the kernels of the time; on Zen 5 (family 26)
//     Q8_0's row kernel prefetched the weights 4 KB ahead (q8Prefetch,
//     the lanes' order's kernel: d=1536 GQA decode 56–61 → 64–65 tok/s at
//     1 thread, 77–95 → 85–98 at 2, alternated), and the quad order's
//     q8quadRows does from Zen 4 on (Zen 4: d=768 280–283 → 308 tok/s at 1
//     thread, 374–414 → 417–423 at 2; unmeasured on Zen 5). On the avx2 path of an AMD EPYC Zen 1 (family
//     23, 2 vCPUs) it is the other way round: without it the weights
//     arrive no faster than the arithmetic consumes them, one after the
//     other, and every avx2 decode kernel prefetches. Q8_0 then read the
//     task's rows one after the other, two at a time, prefetching the next
//     two at the same offset (q8rowsAVX2: 8 layers d=768, 1 thread, 90 →
//     137 tok/s); F16 and BF16 four interleaved rows a call, prefetching
//     the next four (f16dot4AVX2, bf16dot4AVX2: 61 → 82 and 61 → 89); Q4_K
//     and Q6_K prefetch 2 KB ahead into the next row (kqPrefetchAVX2: 165
//     → 176 and 120 → 133). Since the Zen 3 measurements below, avx2's
//     F16, BF16 and Q8_0 decode reads four rows a quarter of the task
//     apart and prefetches the row after each (four streams). Each
//     kernel has the bits of the one it replaces (TestF16Rows,
//     TestF16RowsKernels, TestBF16Rows, TestQ8Rows, TestQ4KRows,
//     TestQ6KRows, TestKQRowsPrefetch), so batch invariance is unchanged.
//   - Prefill runs register tiles on the vector paths (tile_amd64.s,
//     q8blk_amd64.s, kqtile_amd64.s, q8avx2_amd64.s): 4×4 outputs on avx512 and 3×4 on
//     avx2 for float weights (F32, and F16/BF16 blocks decoded once per
//     task), Q8_0 on avx2 in 4×3 tiles (q8tile4x3AVX2: each weight block's
//     |w| shared by four activation rows, the block's twelve scales in three
//     4-lane products, 5 vector instructions a block and output besides
//     loads and a broadcast where the one-row kernel spends 10; Zen 1,
//     d=768, 128 tokens: 179 → 234 tok/s), Q8_0 with VPDPBUSD where the CPU has AVX512_VNNI in
//     the quad order on a tile of 16 weight rows in a zmm's lanes × 4
//     activation rows (q8quadTile: per block, dword k of the 16 rows
//     packed once a call by q8blkPack, biased to unsigned, into a pooled
//     scratch of 576 bytes a block, not a copy of the weights, the next
//     call's rows prefetched in memory order as it goes (16 sequences of
//     the d=768 model together, Zen 4: 892–925 → 1,028–1,077 tok/s; the
//     packing is still about 30% of that step); each
//     activation row's dword k broadcast from q8acts.t; a row's exact
//     block sums start at −128·Σx, q8acts.tc; four accumulators a row;
//     a row's 16 outputs stored whole: 333 cpu-GOP/s on
//     BenchmarkQ8AMXTile's shape against the lanes' order's 4×8 tile's
//     136–139, Zen 4, 1 thread), Q6_K as 4
//     activation rows × every weight row of the task's block, the
//     weights' quants and scales unpacked once for all rows (kqtile.go),
//     Q4_K in the amx order on every amd64 vector path: 16 activation rows
//     in the lanes against each weight row (AMX tiles, the VNNI tile, and
//     on avx2 q4kblkTileAVX2, the sub-block's products added as int16
//     before one VPMADDWD by the scale: Zen 1, d=768, 128 tokens, 286 →
//     461 tok/s against four rows × one weight row in the lanes' order);
//     every element of a tile
//     has the order and bits of the one-row kernel, so a row's result is
//     the same in any batch.
//   - Attention is tiled as flash attention (attention.go): a task takes
//     16 query rows × the query heads of one kv head through the keys and
//     values in blocks of 64 positions (counted from position 0 for every
//     query, so a vector's blocks depend only on its own position), with
//     an online softmax per head (running maximum, rescaling, a float64
//     normaliser) and no score matrix or whole-context score vector. A
//     sliding window (AttentionWith) restricts each block to the vector's
//     positions [max(0, p+1−W), p+1): the blocks stay counted from 0, a
//     register tile starts at its first (smallest) window start, keys and
//     values below a task's windows are not read (their pages' tags are
//     still checked), and a window wider than the sequence changes no bit.
//     Bidirectional rows read to their span's end, and T5's relative
//     position Bias is added to a block's scores before the scale (both in
//     flash only; flashDecode has neither). On
//     avx512 a register tile of 4 heads scores a whole key block in one
//     call (scores4AVX512, the 16 scores of four keys reduced together by
//     TREDUCE16SUM, the prefill tiles' transposing tree, where one
//     reduction a score had taken twice the multiply-adds' time) and 4
//     heads sum each value row loaded once (wsum4x64AVX512), with the bits
//     of the one-head kernels; exponentials run 16 lanes at a time with
//     expf's bits, and the softmax's two loops are kernels (scaleMax
//     avx2's below, expSumAVX512 expSubAVX512's exponentials with the
//     block's float64 sum; they had been Go loops here:
//     BenchmarkAttentionPrefill, a 2,048-token prompt of the d=768 model's
//     heads, Xeon family 6 model 207, 1 thread, 97–111 → 113–140
//     Mpairs/s with avx2's kernels, then 142–157 with the transposing
//     tree, 155–169 with expSumAVX512). On avx2 the same: a 3-row
//     tile scores a whole key block in one call (scores3AVX2, the 12
//     scores of four keys reduced together by RED4 in TSUM8's order), 4
//     heads sum each value row loaded once (wsum4x16AVX2, the decode
//     kernel), exponentials run 8 lanes at a time (expSubAVX2, also
//     SiLU's) and the softmax's two loops are kernels (kset.scaleMax: the
//     scaled scores and their maximum, NaN kept; kset.expSum: the weights
//     with the block's float64 sum in online's four-lane order), with the
//     same bits (Zen 1, d=768, F16 KV, a 2,048-token prefill: Q4_K
//     153 → 195 tok/s, F16 160 → 211 with the 16-row tasks; Zen 3, F16:
//     the softmax's share of the CPU time 10.9% → 7.4%). Keys and values are read by
//     offsets computed from the block table after every page's tag and
//     fill were checked; the assembly checks each offset against the arena.
//   - Decode (a task of one query row on avx512 or avx2, head dimension a
//     multiple of 64) runs flashDecode (decode_amd64.s): the offsets of
//     the row's keys and values are computed once, a page at a time; the
//     group's query heads score 16 keys at a time in zmm (8 in ymm on
//     avx2), one accumulator per key, the accumulators reduced together by
//     a transposing tree that adds the lanes in the one-key kernel's order
//     (TSUM16, HSUM8), so flash's bits; each key group is read once from
//     memory with prefetches two groups ahead and then from L1 for the
//     other heads; values are summed four heads at a time (a short group
//     padded with a scratch output; 64 elements a call on avx512, 16 on
//     avx2) with prefetches. Every vector's operations and their order are
//     flash's, so a row has the same bits decoded alone or inside a
//     prefill span (TestAttentionLongContext steps through single rows,
//     with 3 and 8 query heads per kv head). BenchmarkAttentionDecode (one
//     row, 12 query heads, 4 kv heads of 64, pages of 16, 1 thread; AMD
//     EPYC, avx512, 2 shared vCPUs, medians of 3 noisy runs): after ÷
//     before for f32 KV 1.0–1.9× at 128 tokens (in cache, noisy), 1.5× at
//     2,048, 1.7× at 8,192; f16 KV ÷ the old f32 1.2–1.5×, 2.8×, 2.7×
//     (avx2: f32 1.6×, 1.4×, 1.5×; f16 1.5×, 2.1×, 2.5×). At long contexts
//     it streams the KV at about 6–7 GB/s, bounded by memory.
//   - KV types (kernels.KVType): a KVF32 arena stores float32, a KVF16
//     arena IEEE halves (kernels.F32ToF16 on WriteKV: nearest, ties to
//     even) in a []uint16 with the same layout; CopyOut/CopyIn move the
//     stored elements (2 bytes each). Attention computes over F16ToF32 of
//     the halves, exactly as a KVF32 arena over those values: flashDecode
//     (avx512, avx2) reads the halves in place (VCVTPH2PS in registers, no
//     scratch);
//     every other task (prefill, the generic path, other head dimensions)
//     converts each key and value block of its kv head once
//     into float32 scratch (halfRows on the vector paths, a page's rows a
//     call: BenchmarkAttentionPrefill 140–152 → 154–160 Mpairs/s on the
//     Xeon above, against a call a row; f16tab on generic) and runs flash on
//     it. The bits are those of a KVF32 arena holding the rounded values.
//   - Weights stay where the caller put them (a memory-mapped GGUF file):
//     aligned F32, F16 and BF16 data are viewed in place, block types read
//     in place.
//   - The arena keeps a tag and per-layer fill count for every page and
//     checks them before every read (kernels.Arena).
//
// The amx path (amx_amd64.go, amx_amd64.s). Its Q8_0 order is not the
// lanes' order of avx512 without VNNI, nor quite the quad order of avx512
// with it (one accumulator, not four): per output, over blocks in order
// from +0,
//
//	acc = fma(float32(Σ_{i<32} w_i·q_i), round32(d_w·d_x), acc)
//
// one float step per block of 32 products where the lanes' order takes one
// per 4 (eight lanes of 4-product sums, then HSUM8). That is what lets
// AMX help: a tile multiply (TDPBSSD, int8×int8 → int32) computes whole
// block sums, m ≤ 16 weight rows (loaded in place from the weights, 32
// bytes a row) × 16 activation rows (the block's 8 dwords of the rows,
// 64 bytes a dword: q8acts.t, transposed once per product), the exact
// integers, then the float steps run with the 16 activation rows in a
// register's lanes, one accumulator a weight row, while the tile unit
// computes the next block's sums into the other of two 1 KB slots. With
// the lanes' order AMX cannot beat VPDPBUSD: each int32 a tile yields is a
// 4-product lane sum, so a TDPBSSD gives 256 of them in about 16 cycles
// (K = 4; its K = 64 unused) and TILESTORED 1 KB more; a first kernel
// built that way, bit-identical to the VNNI tile, ran at 0.6× it.
// Decode (tasks of fewer than 4 activation rows, q8amxMinRows) runs
// q8rowsBlk instead (a padded tile would compute 15 unused rows): the
// task's weight rows one after the other, VPDPBUSD per block, eight
// blocks' lanes summed by a VPHADDD tree, their scales gathered, the
// eight fused multiply-adds in order: the tile's bits. Every Q8_0
// product of the path goes through one of the two, so a row's result is
// the same alone or in any batch (TestBlockDecodeBatch, TestQ8AMXProduct),
// and TestQ8AMX checks both kernels against q8amxRef, the order in Go
// (block sums, exactly rounded fused multiply-adds), on every quant byte,
// activations at ±127, 1–16 weight rows, 1–4 groups, padded rows. The
// tests skip, saying so, where the CPU lacks AMX; breaking the kernel on
// purpose (TDPBUSD for TDPBSSD, a wrong accumulator) fails them and the
// conformance suite. Linux must grant the tile state first (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA, once per process: amxPermit);
// the path is offered only when it did. Tile state is per thread and a
// goroutine may move between threads, so each assembly call loads the
// tile configuration and ends with TILERELEASE: no tile state survives a
// call (an assembly function is not preempted inside). The Go assembler
// lacks the AMX mnemonics: they are BYTE-encoded, the encodings listed in
// amx_amd64.s and q4kamx_amd64.s.
//
// Q4_K on amx, and on avx512 where the CPU has AVX512_VNNI, has its own
// order too (kquant.go, q4kamx_amd64.go): per
// output and super-block of 256, the exact integers isum = Σ sc·q·x and
// msum = Σ m·Σx (int32), then
//
//	acc = fma(float32(isum), round32(d·d_x), acc); acc = fma(−float32(msum), round32(dmin·d_x), acc)
//
// over super-blocks in order from +0, one accumulator (the VNNI order
// keeps 8 lanes of sub-block sums). The prefill tile (q4kamxTile): each
// call repacks its ≤ 16 weight rows once into pooled scratch
// (q4kamxPack, in assembly: 512 bytes a row and super-block) as the
// products sc·q (≤ 945) split into a low and a high byte plane, so that
// TDPBUSD (weights unsigned, activations signed, K = 64) sums a whole
// super-block into two accumulator tiles in 4 steps each, isum = lo +
// 256·hi exactly; msum comes from the activations' 32-value sums in pairs
// (q8acts.kb, with the transposed Q8_K rows kt and scales kd), four
// VPDPWSSD against the weight row's minimums broadcast. The float steps
// (13 instructions a weight row, super-block and 16 activation rows) run
// while the tile unit computes the next super-block into the other of
// two 2 KB slots; outputs are scattered as Q8_0's. Tasks of fewer than 4
// rows, and rows of more than 32,768 values, run q4krowsBlk, the decode
// kernel: exact integer lanes (VPDPWSSD of nibble products with the
// VPERMW'd scales) summed per super-block, then the same two steps,
// prefetching kqPrefetch bytes ahead (d=1536
// GQA Q4_K decode on the Intel Xeon, 1 thread: 20 → 35 tok/cpu-s, the two
// builds alternated): the tile's bits (TestQ4KAMX against q4kamxRef, the order in
// Go, on quantized and random weights, 1–16 weight rows, 1–4 groups;
// TestQ4KAMXProduct 1–70 rows, 1 and 2 threads; TestBlockDecodeBatch;
// TDPBSSD for TDPBUSD, or the two steps swapped, fails them and the
// conformance suite). Other types run avx512's kernels.
//
// Without AMX, the avx512 path with AVX512_VNNI runs the same order
// (the same bits as amx on one machine) with a VNNI tile,
// q4kvnniTile: no repacking, the Q4_K rows read in place. Per group of 16
// activation rows (their dwords in the lanes, q8acts.kt) and super-block,
// four weight rows a pass: each nibble dword of a row broadcast and
// masked (VPANDD with a broadcast operand: the low nibbles, and the high
// ones in place, 16 times their value) meets the 16 rows' dwords of its
// 4 values in VPDPBUSD (8 values a weight dword, against 4 a product
// byte plane on AMX); each 32-value sub-block's lanes are shifted back
// (exact), times its scale (VPMULLD) and added: isum. q4kvnniScal writes
// a call's d, dmin, minimums and scales (64 bytes a row and super-block);
// the float steps keep their accumulators in scratch memory; each
// super-block's float steps prefetch the next call's rows of that
// super-block, so the weights' stream from memory overlaps the integer
// work (without it the first touch of each line, in q4kvnniScal, took a
// fifth of a 16-sequence decode step). AMD EPYC (Zen 5, Turin class, 2
// vCPUs): BenchmarkQ4KAMXTile (64 × 16 rows of 3,072) 469 cpu-GOP/s
// against 226 for the vector order's 8-row VNNI tile it replaced; 16
// sequences decoded together, 8 layers d=768, 1 thread, 128-token
// prompts: 1,003–1,105 → 1,490–1,512 tok/s (alternated).
//
// Every path is deterministic and batch-invariant with its own fixed order
// (generic: dot.go; avx2, avx512: dot_amd64.go; neon: dot_arm64.go); paths are not bit-identical
// to each other, each is within the conformance tolerances and the test
// suite runs kernelstest on every path the machine has. On the vector paths
// block-type products multiply int8 by int8 after quantizing each
// activation row, as llama.cpp does: Q8_0 and Q4_0 on Q8 blocks of 32
// (q8.go; with VNNI the Q8_0 weights are biased to unsigned, w+128, and
// each block starts from −128·Σq, three integer instructions per block and
// row), Q4_K and Q6_K on Q8_K blocks of 256 with their 16-value sums
// (kquant.go), within the suite's extra activation-rounding term; the
// avx512 path runs the 256-bit Q4_0/Q4_K/Q6_K kernels of avx2 (same bits;
// with VNNI its Q4_K and Q6_K decode kernels are zmm, the same bits).
// Q4_1, Q5_0, Q5_1, MXFP4, Q2_K, Q3_K and Q5_K have no integer product yet: on every
// path their weights are decoded to float32 (kernels.Dequantize, ggml's
// values) and meet float activations in the float kernels.
// F16 and BF16 are converted in registers (VCVTPH2PS, a shift), exactly as
// the scalar decoders do — except BF16 on the avx512 path where an AMD
// CPU has AVX512_BF16 (bf16Order: on Intel VDPBF16PS runs at half the
// float tiles' rate, and BF16 stays in the float order there), which has
// its own order (bf16dp.go), as llama.cpp
// multiplies BF16: the activations rounded to BF16 first (VCVTNEPS2BF16),
// then VDPBF16PS, two exact products per lane and instruction, each
// added with its own rounding (odd element first: the instruction's
// definition, which the hardware follows here — TestBF16DP against
// bf16dpRef, TestBF16Round on every bit pattern class); the conformance
// suite's BF16 bound adds 2⁻⁸·Σ|x·w| for that rounding. Prefill runs
// 4×n tiles of 16 VDPBF16PS a 32-value step on the weights in place and
// the product's activation rows rounded once (prepareBF16); decode the
// two-stream row kernel, rounding the row in registers: the same bits.
// AMD EPYC (Zen 5, 2 vCPUs), 8 layers d=768 BF16, 1 thread, prompt 128,
// alternated: prefill 1,143–1,158 → 1,965–2,071 tok/s (llama-bench
// 1,845–2,084), decode about even (191–218 against 194–198; llama-bench
// 206–212).
//
// Q4_K blocks of at most 16 activation rows (decode batches) on the amx
// path run avx512's VNNI tile instead of AMX (kset.q4kfew: the same
// bits), which reads the weight rows in place: packing a task's weights
// for the AMX tile (q4kamxPack) took as long as the tile itself for 16
// rows. 16 sequences decoded together, 8 layers d=768 Q4_K, 1 thread,
// Intel Xeon family 6 model 207, alternated: 1,040–1,124 → 1,196–1,243
// tok/s.
//
// BF16 on the amx path where the CPU has AMX-BF16 has an order of its own
// (bf16amx_amd64.go): the activations rounded to BF16 as above, then per
// output element C = +0 and one TDPBF16PS element per whole 32-value
// chunk, in order (the tail, ascending, in Go). The instruction's sum of a
// chunk's 32 exact products is the hardware's own: on an Intel Xeon of
// family 6 model 207 about half of random elements differ by an ulp or two
// from every sequence of float32 roundings tried (fused steps even or odd
// element first, pairs or chunks rounded once, truncation), so there is no
// Go model; an element depends only on its two rows (the same bits in any
// row and column of a tile, with 1 or 16 activation columns and any number
// of weight rows). Prefill computes tiles of 16 weight rows (read in place)
// × 16 activation rows, four activation groups and a task's weight groups
// in one call, the activations rounded and packed in the VNNI order once a
// product (prepareBF16, bf16pack); decode runs the same tiles on one
// activation column, the row rounded once, the outputs stored in place:
// the same bits, which TestBF16AMX checks for 1–70 rows on 1 and 2
// threads, besides the float64 sum within float32 accumulation's bound.
// The same Xeon (2 vCPUs), 1 thread, CLOISON_CPU=avx512 and amx
// alternated, prompt 128: 8 layers d=768 BF16 prefill 445–492 → 2,166–2,376
// tok/s (llama-bench: 419), d=1536 GQA 71–75 → 205–234 (prompt 16);
// decode even (d=768 204–221 against 195–231 tok/s; d=1536 15.6–17.2
// against 15.2–16.5: reading the weights bounds it). Packing the
// activations in each task instead of once a product took 60% of the
// prefill (the tile 12%): 721 against 647 tok/s.
//
// The float prefill tiles (F32, F16, and BF16 without AVX512_BF16) run on
// avx512 as one call per four activation rows over the whole weight block
// of the task (dot4xnAVX512, f16dot4xnAVX512): the 4×4 register tile of
// dot4x4AVX512, its lanes and sums, the same bits, without a Go call,
// slicing and copy per 16 outputs (F16 and F32 prefill 15–25% faster,
// Zen 5). F16 weights are converted in registers by the tile (VCVTPH2PS
// from memory), not into a float32 block first (the conversion took a
// ninth of an F16 prefill): 1,082–1,125 → 1,256–1,396 tok/s, d=768, 1
// thread, prompt 128. On Intel the other way round is faster: VCVTPH2PS takes a
// slot of one of the two FMA ports there, so blocks of more than 16
// activation rows and up to 4,096 columns (kset.f16convertCols: 48 rows of
// float32 stay in L2) are converted once and run the float tiles, the same
// bits (a decode batch of 16 rows amortizes the conversion too little: 16
// sequences 857–870 → 651–736 tok/s when it did) (TestTileXN holds the
// in-register tile to them on every AVX-512 CPU): BenchmarkMatMul F16 97–107
// GFLOP/s against F32's 134–142 on a Xeon of family 6 model 207; 8 layers
// d=768 F16, prompt 128, 1 thread, alternated five times: 805–906 →
// 1,019–1,076 tok/s; d=1536 GQA (FFN 8,960, whose 8,960-column block keeps
// the in-register tile) 124–131 → 135–138.
//
// The avx2 path on an AMD EPYC of the Zen 3 class (family 25 model 1: AVX2,
// FMA, F16C, no AVX-512; 2 vCPUs, 512 KB L2 each; full-width 256-bit units,
// unlike Zen 1), d=768, 1 thread, alternated builds (noisy VM, ±20%):
//   - Float prefill tiles of 3 activation rows over the whole weight block
//     in one call (dot3xnAVX2, f16dot3xnAVX2: dot3x4AVX2's lanes, sums
//     reduced four at a time by RED4 in TSUM8's order, the same bits; F16
//     converted in registers, no scratch conversion), and a block's last
//     rows%3 activation rows in a tile ending at its last row (its first
//     rows computed again, the same bits) instead of one row at a time:
//     F16 prefill (128 tokens) 403–417 → 492–607 tok/s, BF16 435–541 →
//     540–587. TestTileXN holds both tiles to dot1x4 on the converted
//     weights.
//   - Q8_0's int8 tile (q8tile4x3AVX2) takes each pair's scale from a
//     register (the weight row's d times the four activation rows' d_x,
//     one product per row and block, VSHUFPS per pair) instead of a
//     broadcast from the frame: 23–25 → 29–31 G multiply-adds/s in cache.
//     Even so the int8 step (VPSIGNB, VPMADDUBSW, VPMADDWD, VCVTDQ2PS,
//     VFMADD per 32 values and output, ≈ 3 cycles measured, with no
//     single instruction the bound: removing any one of them did not speed
//     the tile) stays slower than the float tiles, so avx2 runs Q8_0 in the
//     float order (kset.q8float: q8rowFloatAVX2 dequantizes blocks for the
//     float tiles, q8fdot4AVX2 decodes four rows in registers with
//     dot4AVX2's bits; TestQ8Float): prefill 128 tokens 383–389 →
//     433–488 tok/s; decode, compute-bound at ≈ 9 G multiply-adds/s in
//     cache (VPMOVSXBD, VCVTDQ2PS, VMULPS, VFMADD per 8 weights), 200–218
//     → 125–175. make peer-bench, both in one run: prefill 0.70 → 1.07 ÷
//     llama.cpp, decode 1.73 → 1.25 (1 thread).
//   - Decode reads four rows a quarter of the task's rows apart at a time
//     (F16/BF16 through decodeRow, Q8_0): one core reads four sequential
//     streams at 20 GB/s against 12.5 for one (two: 16.4), so d=768 F16
//     decode 76–79 → 111–116 tok/s, Q8_0 (int8 order) 133 → 184–187. The
//     Q4_K and Q6_K row kernels are bound by their arithmetic instead (in
//     cache as fast as streamed: visiting their rows in the same order
//     changed nothing).
//   - Q4_K decode (q4kblkAVX2) takes each sub-block's scale word by one
//     VPSHUFB from the eight scales broadcast once a super-block (five
//     scalar and vector instructions a sub-block before) and reduces the
//     integer sums and the minimums' sums together (VPHADDD), converting
//     both and d, dmin in one instruction each: 44–50 → 33–37 cycles a
//     super-block in cache, d=768 decode 292 → 315 tok/s (1 thread), 470 →
//     525 (2 threads). Q6_K decode (q6kdotAVX2) takes a 32-value chunk's
//     two scales by one broadcast from the frame and a VPSHUFB (seven
//     instructions before): 14.5–17 → 18.6–20.6 G multiply-adds/s in
//     cache, d=768 decode 236 → 279 tok/s. The integer sums are exact, so
//     any order of them gives the same bits; TestKQuantInt now holds Q6_K
//     to negative scales too (llama.cpp's files have them).
//   - Tasks of 66 activation rows where the 3-row float tiles compute the
//     product (kset.rowTile; 64 elsewhere): a 64-row task is 21 tiles and
//     one more ending at its last row, two rows computed twice, where 66
//     rows are 22 tiles (3% fewer tile calls at 2,048 tokens, 2% at 128).
//   - The tiles prefetch the weight block this thread most likely takes
//     next, threads·(block) rows on (tasks go to the threads in turn), not
//     the adjacent one, which at 2 threads the other thread takes: d=768
//     F16 prefill, 2 threads, 128 tokens, five alternations, median 1,485
//     → 1,566 tok/s (4 of 5 pairs faster).
//   - The 3×n float tiles prefetch only while there is something left
//     to prefetch: a tile call whose prefetch memory is used up (the last
//     of a task's tiles, after the first few have fetched the next block)
//     or absent (float32 and Q8_0 blocks) runs a loop without the
//     PREFETCHT0, which had re-read the first activation row, one load
//     operation a step. d=1536 GQA, 1 thread, prompt 128, 18 alternated
//     rounds: F16 prefill 92.3 → 94.4 tok/s (means; ±10% a round),
//     Q8_0 78.8 → 81.5 (6 rounds, llama-bench 77.5 in the same run). A
//     second prefetch of the next weight group's bytes (one line a step)
//     lost: 92.8 → 83.9 tok/s.
//   - SiLU and SwiGLU in one kernel (siluMulAVX2: 0 − g, EXP8's
//     exponential, 1 + e, the division and the product on 8 lanes; siluRow's
//     Go loops did the negation, division and product one value at a time;
//     TestSiluRow): 0.30 → 0.77 G values/s. With the task rows above,
//     d=768 F16 prefill (128 tokens, eight alternations, medians) 708 →
//     723 tok/s.
//
// What bounds prefill (one thread, avx512, Xeon with VNNI; docs/models.md
// has the make peer-bench figures): the block-type products, int8 tiles at
// about 50 (Q8_0) and 60 (Q4_K) GOP/s per core in BenchmarkMatMul, where
// llama.cpp runs weights repacked for its VNNI GEMM; at 2,048 tokens
// attention takes about 30% of a Q8_0 prefill (56% before the flash
// tiling), its score tile spending most of its instructions on the lane
// sums of dot1x4's order.
//
// On amx (one thread, Intel Xeon of the Sapphire Rapids class with
// AMX-INT8, 2 vCPUs shared with other work at load 11–14, avx512 and amx
// alternated in one run, figures per CPU second): the Q8_0 tile computes 64
// activation rows × 16 weight rows of 48 blocks at 545–615 GOP/s against
// 163–184 for the 4×8 VNNI tile (BenchmarkQ8AMXTile, 3.3×); a d=1536 GQA
// Q8_0 model (8 layers, ffn 4096, vocabulary 32,000) prefills 128 tokens at
// 529–571 tok/cpu-s against 313–335 (1.7×; cloisonctl bench, CPU time of 6
// repetitions less 1), decodes one sequence at 33–36 against 31–33
// tok/cpu-s, 4 sequences at 93–94 against 89–92, 16 at 287–294 against
// 181–185 (1.6×). llama.cpp's native llama-bench (build de3ff81 without
// AMX, whose AMX build crashed here) prefilled the 128 tokens at 244–249
// tok/cpu-s in the same run: amx 2.2× it, avx512 1.25×. In an amx prefill
// the tile kernel takes about 70% of the CPU time, quantizing and
// transposing the activations (Go) about 12%. In BenchmarkQ8AMXTile the
// tile instructions alone (zero, two loads, TDPBSSD, store a block) run at
// about 1,060 GOP/s and the float steps alone (three instructions per
// weight row, block and 16 activation rows) at about 1,140, together at
// about 600: the two do not overlap, though the tile unit works on the next
// block's slot (nor did alternating two sets of tiles, or dropping the
// compare of the weight-row count, change it). Not yet tried: TDPBF16PS on
// int8 values held as bf16 (exact: a block's products and their sums stay
// below 2²⁴), whose float32 sums would spare the conversion (two
// instructions instead of three) at the price of bf16 copies of weights and
// activations.
//
// Q4_K on amx (the same machine, one thread, load 3.4–4.5): the tile,
// packing included, computes 64 activation rows × 16 weight rows of 12
// super-blocks at 519 cpu-GOP/s against 138 for the avx512 path's 8-row
// VNNI tile (BenchmarkQ4KAMXTile, 3.8×). cloisonctl bench, prompt 128,
// amx, avx512 and llama.cpp's native llama-bench (-t 1 -p 128 -n 0 -r 2,
// the build without AMX) alternated, four rounds in two runs, wall tok/s
// (noisy at that load): 8 layers d=768 amx 870–2,045, avx512 485–991,
// llama.cpp 700–1,445, amx ÷ llama.cpp per round 1.19–1.68 (avx512
// 0.67–0.81); d=1536 GQA 235–455, 77–156, 109–217, amx ÷ llama.cpp
// 1.43–4.1 (avx512 0.69–1.18). BenchmarkMatMul Q4_K (64 rows × 1,024
// · 512 × 1,024, 1 thread): 157 against 51–53 GFLOP/s; in its profile
// quantizing the activations to Q8_K (Go, shared with avx512) took about
// as long as the tile, so on AVX-512 (avx512 and amx) its maximum and its
// loop now run in assembly (q8k_amd64.s, the Go loop's bits:
// TestQuantizeRowQ8K against the reference on random bit patterns, NaN,
// infinities): amx 317–402 GFLOP/s. With it, two more rounds at load
// 4.3–5.5: d=768 amx 1,062–1,458, llama.cpp 767–787 (1.35–1.90); d=1536
// GQA 217–249 against 83–104 (2.1–3.0). Decode, d=768, 16-token prompt, 32
// steps, tok/cpu-s, amx against avx512: one sequence 300–399 against
// 302–328, 4 sequences 436–439 against 349–422, 16 sequences 1,074–1,076
// against 711–714 (1.5×).
//
// What bounds a decode batch (the aim was 16 sequences decoded together at
// ≥ 8× one sequence's tok/s, as a GPU batch would; this says why the CPU
// tiles fall short).
// Machine: AMD EPYC, CPU family 26 (Zen 5: AVX-512 at full width; earlier
// notes here called it Zen 4), 2 vCPUs shared with other work, 1 thread,
// avx512 path; 8 layers d=768 ffn 2048 vocab 8192 (56.6 M weights, a
// token's step 56.6 M MACs), prompt 16, 32 decode steps.
//
//   - Peak, tight loops without loads: VPDPBUSD 137 int8 MAC/cycle on zmm
//     (2 a cycle, ≈ 420 GMAC/s at ≈ 3.1 GHz), 70 on ymm. The step the fixed
//     reduction order asks per output and Q8_0 block (start from the
//     −128·Σ lanes, VPDPBUSD, convert, multiply the two scales, FMA: the
//     bits of q8rowsVNNI) runs 23 MAC/cycle on ymm, as q8tileVNNI does it,
//     and 46 on zmm with two outputs a register (65 if the multiply could
//     be hoisted, which the order forbids: the scale product is one per
//     output and block).
//   - Achieved, Q8_0, BenchmarkDecodeBatch rows=16 (2048×768, cached, load
//     ≈ 3, both in one run): the 4×8 zmm tile 120 GMAC/s (240 GOP/s, ≈ 39
//     MAC/cycle, 30% of the VPDPBUSD peak, 85% of the block step's zmm
//     ceiling) against 51 for the 4×4 ymm tile; the whole product 148 ÷
//     76 GOP/s (1.95×; 1.92× in tok/cpu-s), 1.85× with weights streamed
//     past the L3 (weights=streamed). Q4_K's 8-row tile on zmm: 5–24% more
//     tok/cpu-s than on ymm. Prefill, one sequence, old and new builds
//     alternated, load 2.6–3.5: Q8_0 1.47–1.60× at 128 tokens (1,147 ÷
//     718 tok/s) and 1.38–1.53× at 2,048; Q4_K 1.04–1.45× and 1.07–1.17×.
//   - The model, cloisonctl bench, old and new builds alternated, load
//     6–8 (tok/cpu-s, wall figures were useless at that load): Q8_0 16
//     sequences 598–742 against 439–444 (1.35–1.67×), 16 ÷ 1 2.5–2.7×
//     (before 1.3–2.0×); Q4_K 829–833 against 736–872, 16 ÷ 1 1.7–2.4×;
//     F16 (unchanged) 16 ÷ 1 ≈ 3×. At load ≈ 1 before this change the
//     wall ratios were Q8_0 1.3–1.5×, Q4_K 1.8–2.0×, F16 3.0×: one
//     sequence runs at 320–400 tok/s (Q8_0, ≈ 20 GB/s of weights), far
//     above the ≈ 120 tok/cpu-s of a loaded machine the 4.3× of the notes
//     before came from.
//   - llama.cpp (make peer-batch, node-llama-cpp 3.22.1, sequences: 16,
//     its AVX512 VNNI REPACK build; the 16 sequences' tokens go into one
//     llama_decode per step, 37 calls for 33 steps), side by side, wall
//     tok/s, best of 3 rounds, load 4–7, this build: ours F16 2.68×, Q8_0
//     1.99×, Q4_K 1.88×; llama.cpp 1.33×, 1.10×, 1.36× (before the 4×8
//     tile, load 4.3–4.8: ours 1.77×, 1.96×, 2.08×, llama.cpp 1.34×,
//     1.02×, 1.58×; at load < 1: llama.cpp 1.37×, 0.81–0.97×, 1.16–1.28×). llama.cpp's 16-sequence step costs per token about what
//     its one-token step does, and a 16-token prompt of one sequence costs
//     12–15× its one-token step: it does not reach 8× on this CPU either.
//   - Is 8× reachable here? For Q8_0 it needs the 16-row step within 2× the
//     one-row step (≈ 3 ms, memory-bound): 16·56.6 M MACs in ≈ 6 ms, 150
//     GMAC/s over the whole step, above the 46 MAC/cycle (≈ 143 GMAC/s)
//     ceiling of the block step on zmm even without a load, attention,
//     quantization or SwiGLU. With this reduction order (one float
//     multiply-add per output and 32-value block, what makes a row's bits
//     the same alone and batched) 8× is out of reach on one Zen 5 core for
//     Q8_0 and Q4_K, whose one-row step reads even fewer bytes; F16's
//     one-row step reads 2 bytes a weight, which is why its ratio is the
//     highest.
//   - What is left in a 16-row Q8_0 step: the 4×8 tile ≈ 67%, then
//     attention (≈ 8%), quantizing the activations (≈ 3%), SwiGLU.
//     Doubling the activations once per product instead of 8 VPERMD a
//     block in the tile, and the −128·Σw lanes in the packed block, gave
//     the whole product 1.62× (cached) and 1.85× (streamed) the 4×4 ymm
//     tile's tok/cpu-s, from 1.45–1.51× and 1.66× (load ≈ 6.5). Not yet
//     tried: a tile of 6 rows (the registers now allow it), a 16-row Q4_K tile that
//     unpacks each weight chunk once for 16 rows, and prefetching the next
//     8 weight rows while a group's tiles run.
//
// The same bound on AVX2 without VNNI, measured (AMD EPYC Zen 3, family
// 25 model 1, 2 vCPUs, 1 thread; BenchmarkPeak, tight loops without
// loads): 100–102 GFLOP/s of float32 multiply-adds (twelve VFMADD231PS
// chains), 75 with the 3×4 F16 tile's four VCVTPH2PS to twelve
// multiply-adds (the conversion takes a slot of the two FMA pipes on this
// core, so the F16 prefill tile's 70–80 GFLOP/s in a model is at its mix's
// ceiling), and 95–96 G int8 multiply-adds/s for VPMADDUBSW, VPMADDWD and
// VPADDD per 32 byte products (the least work of a block without VNNI).
// 8 layers d=768 (56.6 M weights, 113.2 MFLOP a token), make peer-batch:
// one sequence decodes at 177 tok/s on F16, 197 on Q8_0, 352 on Q4_K; 8×
// would be 160 GFLOP/s of F16 products, 178 of Q8_0's (the float order on
// avx2: the F32 tiles) and 159 G int8 multiply-adds/s of Q4_K's, each above
// the core's peak for that work before any load, conversion, attention or
// quantization. Sixteen sequences reach 3.03×, 2.16× and 2.26× (llama.cpp
// built natively, in the same run: 3.07×, 2.33×, 1.61×; ours ÷ llama.cpp at
// 16 sequences 1.43, 1.08, 1.51).
//
// On AVX-512 with VNNI (AMD EPYC Zen 4, family 25 model 17, 1 thread;
// BenchmarkPeak's zmm loops): 116 GFLOP/s of float32 multiply-adds on ymm
// and zmm alike (two 256-bit FMA pipes, a zmm instruction in two halves),
// 116.6 with the 4×4 F16 tile's four VCVTPH2PS to sixteen multiply-adds
// (the conversion takes no FMA slot on this core) and 233.6 G int8
// multiply-adds/s with VPDPBUSD. One d=768 sequence decodes at 197 tok/s
// on F16 and 730 on Q4_K (interleaved rows, q4kx.go); 8× would be 178
// GFLOP/s of F16 products and 330 G int8 multiply-adds/s of Q4_K's, above
// those peaks; Q8_0's (327 → 2,616 tok/s, 148 G) is below VPDPBUSD's peak
// but 92% of its quad tile's own rate (322.5 cpu-GOP/s, 161 G), and a
// profile of a 16-sequence step (981 tok/s) spends 32% in the tile, 32% in
// its weight packing (q8blkPack) and 36% in the rest — attention,
// quantization, norms, SwiGLU: 0.37 ms a token, the whole of 8×'s budget
// (0.38 ms) before any product. Sixteen sequences reach 3.83×, 2.90× and 1.81×
// (llama.cpp in the same run 2.68×, 1.87×, 1.81×; ours ÷ llama.cpp at 16
// sequences 1.45, 1.64, 1.38).
//
// Driving loop: see package kernels.
package cpu
