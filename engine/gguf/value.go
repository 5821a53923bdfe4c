package gguf

import (
	"fmt"
	"math"
)

// Value is one metadata value: a scalar, a string, or an array of one element
// type. The zero Value is invalid.
type Value struct {
	typ  ValueType
	elem ValueType // element type when typ == TypeArray
	v    any       // uint8…float64, bool, string, or a slice of one of them
}

// Type returns the value's type.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns the element type of an array value.
func (v Value) ElemType() ValueType { return v.elem }

// Any returns the value as a Go value: a scalar (uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64, float64) or a slice of
// one of those types for an array.
func (v Value) Any() any { return v.v }

// Len returns the number of elements of an array, 0 for a scalar.
func (v Value) Len() int {
	switch a := v.v.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	}
	return 0
}

// Int returns an integer scalar of any width as int64. It fails for values
// that are not integers and for a uint64 above math.MaxInt64.
func (v Value) Int() (int64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// Float returns a float or integer scalar as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.Int(); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns a bool scalar.
func (v Value) Bool() (bool, bool) { b, ok := v.v.(bool); return b, ok }

// Str returns a string scalar.
func (v Value) Str() (string, bool) { s, ok := v.v.(string); return s, ok }

// Strings returns an array of strings.
func (v Value) Strings() ([]string, bool) { s, ok := v.v.([]string); return s, ok }

// Float32s returns an array of float32.
func (v Value) Float32s() ([]float32, bool) { s, ok := v.v.([]float32); return s, ok }

// Ints returns an integer array of any element width as []int64.
func (v Value) Ints() ([]int64, bool) {
	var out []int64
	switch a := v.v.(type) {
	case []uint8:
		out = make([]int64, len(a))
		for i, x := range a {
			out[i] = int64(x)
		}
	case []int8:
		out = make([]int64, len(a))
		for i, x := range a {
			out[i] = int64(x)
		}
	case []uint16:
		out = make([]int64, len(a))
		for i, x := range a {
			out[i] = int64(x)
		}
	case []int16:
		out = make([]int64, len(a))
		for i, x := range a {
			out[i] = int64(x)
		}
	case []uint32:
		out = make([]int64, len(a))
		for i, x := range a {
			out[i] = int64(x)
		}
	case []int32:
		out = make([]int64, len(a))
		for i, x := range a {
			out[i] = int64(x)
		}
	case []int64:
		out = append([]int64(nil), a...)
	case []uint64:
		out = make([]int64, len(a))
		for i, x := range a {
			if x > math.MaxInt64 {
				return nil, false
			}
			out[i] = int64(x)
		}
	default:
		return nil, false
	}
	return out, true
}

// ValueOf wraps a Go value as a metadata Value. It accepts the scalar types
// listed for Any and slices of them.
func ValueOf(x any) (Value, error) {
	switch x := x.(type) {
	case Value:
		return x, nil
	case uint8:
		return Value{typ: TypeUint8, v: x}, nil
	case int8:
		return Value{typ: TypeInt8, v: x}, nil
	case uint16:
		return Value{typ: TypeUint16, v: x}, nil
	case int16:
		return Value{typ: TypeInt16, v: x}, nil
	case uint32:
		return Value{typ: TypeUint32, v: x}, nil
	case int32:
		return Value{typ: TypeInt32, v: x}, nil
	case float32:
		return Value{typ: TypeFloat32, v: x}, nil
	case bool:
		return Value{typ: TypeBool, v: x}, nil
	case string:
		return Value{typ: TypeString, v: x}, nil
	case uint64:
		return Value{typ: TypeUint64, v: x}, nil
	case int64:
		return Value{typ: TypeInt64, v: x}, nil
	case float64:
		return Value{typ: TypeFloat64, v: x}, nil
	case []uint8:
		return Value{typ: TypeArray, elem: TypeUint8, v: x}, nil
	case []int8:
		return Value{typ: TypeArray, elem: TypeInt8, v: x}, nil
	case []uint16:
		return Value{typ: TypeArray, elem: TypeUint16, v: x}, nil
	case []int16:
		return Value{typ: TypeArray, elem: TypeInt16, v: x}, nil
	case []uint32:
		return Value{typ: TypeArray, elem: TypeUint32, v: x}, nil
	case []int32:
		return Value{typ: TypeArray, elem: TypeInt32, v: x}, nil
	case []float32:
		return Value{typ: TypeArray, elem: TypeFloat32, v: x}, nil
	case []bool:
		return Value{typ: TypeArray, elem: TypeBool, v: x}, nil
	case []string:
		return Value{typ: TypeArray, elem: TypeString, v: x}, nil
	case []uint64:
		return Value{typ: TypeArray, elem: TypeUint64, v: x}, nil
	case []int64:
		return Value{typ: TypeArray, elem: TypeInt64, v: x}, nil
	case []float64:
		return Value{typ: TypeArray, elem: TypeFloat64, v: x}, nil
	}
	return Value{}, fmt.Errorf("gguf: no metadata type for Go type %T", x)
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}
