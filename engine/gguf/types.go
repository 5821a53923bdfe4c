package gguf

import (
	"fmt"

	"github.com/cloison/cloison"
)

// ErrFormat is wrapped by every error that reports a malformed or unsupported
// file (code invalid_request_error).
var ErrFormat = cloison.NewError(cloison.CodeInvalid, "gguf: invalid file")

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of the tensor data when general.alignment
// is absent.
const DefaultAlignment = 32

// MaxDims is the largest number of dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// MaxNameLen is the longest tensor name ggml accepts (GGML_MAX_NAME - 1).
const MaxNameLen = 63

// ValueType is the type of a metadata value.
type ValueType uint32

// Metadata value types, numbered as in the specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size returns the encoded size of a fixed-size value type, or 0 for string
// and array.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// TensorType is a ggml tensor element type.
type TensorType uint32

// Tensor types, numbered as in ggml.h. Numbers that ggml retired are absent.
const (
	F32     TensorType = 0
	F16     TensorType = 1
	Q4_0    TensorType = 2
	Q4_1    TensorType = 3
	Q5_0    TensorType = 6
	Q5_1    TensorType = 7
	Q8_0    TensorType = 8
	Q8_1    TensorType = 9
	Q2_K    TensorType = 10
	Q3_K    TensorType = 11
	Q4_K    TensorType = 12
	Q5_K    TensorType = 13
	Q6_K    TensorType = 14
	Q8_K    TensorType = 15
	IQ2_XXS TensorType = 16
	IQ2_XS  TensorType = 17
	IQ3_XXS TensorType = 18
	IQ1_S   TensorType = 19
	IQ4_NL  TensorType = 20
	IQ3_S   TensorType = 21
	IQ2_S   TensorType = 22
	IQ4_XS  TensorType = 23
	I8      TensorType = 24
	I16     TensorType = 25
	I32     TensorType = 26
	I64     TensorType = 27
	F64     TensorType = 28
	IQ1_M   TensorType = 29
	BF16    TensorType = 30
	TQ1_0   TensorType = 34
	TQ2_0   TensorType = 35
	MXFP4   TensorType = 39
)

type typeTraits struct {
	name      string
	blockSize uint64 // elements per block
	typeSize  uint64 // bytes per block
}

var tensorTypes = map[TensorType]typeTraits{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, BF16: {"BF16", 1, 2}, F64: {"F64", 1, 8},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2}, I32: {"I32", 1, 4}, I64: {"I64", 1, 8},
	Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20}, Q5_0: {"Q5_0", 32, 22}, Q5_1: {"Q5_1", 32, 24},
	Q8_0: {"Q8_0", 32, 34}, Q8_1: {"Q8_1", 32, 36},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144},
	Q5_K: {"Q5_K", 256, 176}, Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66}, IQ2_XS: {"IQ2_XS", 256, 74}, IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S: {"IQ1_S", 256, 50}, IQ4_NL: {"IQ4_NL", 32, 18}, IQ3_S: {"IQ3_S", 256, 110},
	IQ2_S: {"IQ2_S", 256, 82}, IQ4_XS: {"IQ4_XS", 256, 136}, IQ1_M: {"IQ1_M", 256, 56},
	TQ1_0: {"TQ1_0", 256, 54}, TQ2_0: {"TQ2_0", 256, 66}, MXFP4: {"MXFP4", 32, 17},
}

// Known reports whether t is a tensor type this package can size.
func (t TensorType) Known() bool { _, ok := tensorTypes[t]; return ok }

// BlockSize returns the number of elements per block (1 for plain types), or 0
// for an unknown type.
func (t TensorType) BlockSize() uint64 { return tensorTypes[t].blockSize }

// TypeSize returns the number of bytes per block, or 0 for an unknown type.
func (t TensorType) TypeSize() uint64 { return tensorTypes[t].typeSize }

func (t TensorType) String() string {
	if tt, ok := tensorTypes[t]; ok {
		return tt.name
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// RowSize returns the byte size of n elements of type t, or an error if n is
// not a whole number of blocks or t is unknown.
func (t TensorType) RowSize(n uint64) (uint64, error) {
	tt, ok := tensorTypes[t]
	if !ok {
		return 0, fmt.Errorf("%w: unknown tensor type %d", ErrFormat, uint32(t))
	}
	if n%tt.blockSize != 0 {
		return 0, fmt.Errorf("%w: %d elements of %s is not a whole number of %d-element blocks", ErrFormat, n, tt.name, tt.blockSize)
	}
	return n / tt.blockSize * tt.typeSize, nil // n/blockSize*typeSize <= n*4.5: no overflow for n < 2^61
}

// TensorInfo describes one tensor. Dims are in ggml order: Dims[0] is the
// number of elements in a row (the fastest-varying dimension).
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   TensorType
	Offset uint64 // from the start of the data section
	Size   uint64 // bytes
}

// Elements returns the product of the dimensions.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}
