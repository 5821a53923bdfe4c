// Package cuda is the CUDA kernels.Backend, registered as "cuda" by the
// files built with the `cuda` build tag (go build -tags cuda). The default
// build never imports gorgonia.org/cu, which links -lcuda and exits the
// process from its init when no driver is present: only device.go (the
// context, the driver calls, New and the registration) carries the tag.
// The Backend and its arena are written against a small driver interface
// (allocate, copy, zero, launch a kernel of kernels.cu by name), so the
// package's tag-free tests run the whole host side — checks, launch plans,
// argument lists, pointer arithmetic, the transfer format — through the
// kernelstest suite with a driver that executes Go ports of the kernels on
// host memory (emu_test.go). With the cudaemu tag (make cuda-emu-test, part
// of make cuda-check) the same tests run kernels.cu itself: hostemu.cc
// compiles the CUDA C for the host with a small shim and runs each block's
// threads as fibers (barriers, warp shuffles, shared memory). Neither
// checks the GPU, its math library, the driver or performance: those need a
// GPU (scripts/cuda-device-check.sh).
//
// Guarantees (kernels/kernelstest checks them on a GPU, against the same
// tolerances as kernels/cpu, which is the oracle):
//
//   - One goroutine, locked to its OS thread, owns the CUDA context; every
//     driver call is a closure sent to it and run in order, and a panic of
//     gorgonia.org/cu becomes an error wrapping ErrDevice at that boundary.
//     All device work runs on the legacy default stream, so a synchronous
//     copy waits for the kernels queued before it; kernel faults surface no
//     later than the next Download.
//   - Deterministic and batch-invariant: each output element is computed by
//     one thread, or by one warp whose lanes own fixed column sets and are
//     reduced in a fixed butterfly; nothing depends on the number of rows in
//     a launch. Matrix products use the package's own kernel rather than
//     cuBLAS, whose algorithm (and so reduction order) changes with the
//     batch size.
//   - Weights: F32, F16, BF16, Q8_0 and Q4_0 stay in their GGUF bytes on the
//     device and are decoded in the product and embedding kernels; the other
//     types (Q4_1, Q5_0, Q5_1, MXFP4, the k-quants) are dequantized to F32 on the
//     host at NewMatrix (exactly, with kernels.Dequantize) and so take 4
//     bytes per weight on the device.
//   - Mixtures of experts (qwen3moe, mixtral): engine/model refuses them
//     on this backend at Load (ErrUnsupported, naming the backend) until
//     its MoE path is checked against llama.cpp on a device.
//   - The KV arena is one device allocation, pages by offset, in the
//     transfer format of kernels.Arena, plus a device array of page owner
//     tags (Tenant<<32|Gen, Epoch: two uint64, compared exactly). The host
//     keeps tags and fills exactly as kernels/cpu and checks them before
//     every launch; then the device compares every page an attention launch
//     reads with the tag its block table expects (paged_attention_check,
//     and again in paged_attention before the page is read). A mismatch
//     raises a device flag, nothing is read or written, and the call returns
//     a *kernels.TagMismatchError. CopyOut also compares the device tag.
//   - ZeroPages issues one cuMemsetD8Async per run of adjacent pages (and
//     one for their device tags); pages that change owner in WriteKV are
//     zeroed the same way before the new owner's rows land.
//
// Limits: compute capability 8.0 or newer (the embedded PTX targets sm_80
// and sm_90, built by nvcc 11.8: the driver must support CUDA 11.8); head
// dimensions up to 256; one device per Backend (kernels.Options.Device).
// None of kernels' optional capabilities (Scaler, GeGLUer, WindowAttender)
// yet: engine/model refuses gemma3, sliding windows and granite's
// activation and score scales on this backend (model.ErrUnsupported, tested
// by testArchs); phi3 and granite's logit scale run.
//
// The kernels are CUDA C in kernels.cu; `make cuda-ptx` compiles them to
// ptx/kernels_sm80.ptx and ptx/kernels_sm90.ptx, which are committed and
// embedded; `make cuda-check` verifies they are up to date and that the
// package, its tests and cmd/cloisond compile with -tags cuda, with no GPU.
// scripts/cuda-device-check.sh runs the prebuilt test binary on a GPU
// machine.
//
// Driving loop: see package kernels.
package cuda

// Name is the name the backend registers under.
const Name = "cuda"
