//go:build cuda

package main

// Builds with -tags cuda register the CUDA backend: --backend cuda.
import _ "github.com/cloison/cloison/kernels/cuda"
