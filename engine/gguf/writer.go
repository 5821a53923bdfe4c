package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// Writer builds a GGUF v3 file. Set metadata and add tensors in the order
// they should appear, then call WriteTo or WriteFile once. A Writer is not
// safe for concurrent use.
type Writer struct {
	kv        []KV
	kvIndex   map[string]int
	tensors   []wtensor
	names     map[string]bool
	alignment uint64
}

type wtensor struct {
	info TensorInfo
	fill func([]byte) error
}

// NewWriter returns an empty Writer with the default alignment.
func NewWriter() *Writer {
	return &Writer{kvIndex: map[string]int{}, names: map[string]bool{}, alignment: DefaultAlignment}
}

// Set stores a metadata value (see ValueOf for the accepted Go types). Setting
// a key again replaces its value in place. general.alignment must be a uint32
// power of two.
func (w *Writer) Set(key string, x any) error {
	v, err := ValueOf(x)
	if err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	if key == "general.alignment" {
		a, ok := v.Any().(uint32)
		if !ok || a == 0 || a&(a-1) != 0 || a > maxAlignment {
			return fmt.Errorf("gguf: general.alignment must be a uint32 power of two, got %v", x)
		}
		w.alignment = uint64(a)
	}
	if i, ok := w.kvIndex[key]; ok {
		w.kv[i].Value = v
		return nil
	}
	w.kvIndex[key] = len(w.kv)
	w.kv = append(w.kv, KV{Key: key, Value: v})
	return nil
}

// AddTensor adds a tensor whose bytes are data; dims are in ggml order
// (dims[0] is the row length). The data slice is kept, not copied.
func (w *Writer) AddTensor(name string, typ TensorType, dims []uint64, data []byte) error {
	return w.AddTensorFunc(name, typ, dims, func(b []byte) error {
		if len(b) != len(data) {
			return fmt.Errorf("gguf: tensor %q has %d bytes of data, want %d", name, len(data), len(b))
		}
		copy(b, data)
		return nil
	})
}

// AddTensorFunc adds a tensor whose bytes fill writes into a buffer of the
// tensor's exact size when the file is written; it lets a generator stream
// tensors larger than memory would comfortably hold all at once.
func (w *Writer) AddTensorFunc(name string, typ TensorType, dims []uint64, fill func([]byte) error) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("gguf: tensor name %q must be 1 to %d bytes", name, MaxNameLen)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("gguf: tensor %q has %d dimensions", name, len(dims))
	}
	if !typ.Known() {
		return fmt.Errorf("gguf: tensor %q has unknown type %d", name, typ)
	}
	if dims[0]%typ.BlockSize() != 0 {
		return fmt.Errorf("gguf: tensor %q row of %d is not a multiple of the %s block size %d", name, dims[0], typ, typ.BlockSize())
	}
	elems := uint64(1)
	for _, d := range dims {
		if d != 0 && elems > math.MaxInt64/8/d {
			return fmt.Errorf("gguf: tensor %q is too large", name)
		}
		elems *= d
	}
	size, err := typ.RowSize(elems)
	if err != nil {
		return err
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{
		info: TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: size},
		fill: fill,
	})
	return nil
}

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
	buf [8]byte
}

func (c *countWriter) bytes(b []byte) {
	if c.err != nil {
		return
	}
	var n int
	n, c.err = c.w.Write(b)
	c.n += int64(n)
}

func (c *countWriter) u32(x uint32) {
	binary.LittleEndian.PutUint32(c.buf[:4], x)
	c.bytes(c.buf[:4])
}

func (c *countWriter) u64(x uint64) {
	binary.LittleEndian.PutUint64(c.buf[:8], x)
	c.bytes(c.buf[:8])
}

func (c *countWriter) str(s string) {
	c.u64(uint64(len(s)))
	if c.err == nil {
		var n int
		n, c.err = c.w.WriteString(s)
		c.n += int64(n)
	}
}

func (c *countWriter) pad(a uint64) {
	if r := uint64(c.n) % a; r != 0 {
		c.bytes(make([]byte, a-r))
	}
}

func (c *countWriter) scalar(v any) {
	switch x := v.(type) {
	case uint8:
		c.bytes([]byte{x})
	case int8:
		c.bytes([]byte{byte(x)})
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		c.bytes([]byte{b})
	case uint16:
		binary.LittleEndian.PutUint16(c.buf[:2], x)
		c.bytes(c.buf[:2])
	case int16:
		binary.LittleEndian.PutUint16(c.buf[:2], uint16(x))
		c.bytes(c.buf[:2])
	case uint32:
		c.u32(x)
	case int32:
		c.u32(uint32(x))
	case float32:
		c.u32(math.Float32bits(x))
	case uint64:
		c.u64(x)
	case int64:
		c.u64(uint64(x))
	case float64:
		c.u64(math.Float64bits(x))
	case string:
		c.str(x)
	default:
		c.err = fmt.Errorf("gguf: cannot encode %T", v)
	}
}

func (c *countWriter) value(v Value) {
	c.u32(uint32(v.typ))
	if v.typ != TypeArray {
		c.scalar(v.v)
		return
	}
	c.u32(uint32(v.elem))
	c.u64(uint64(v.Len()))
	switch a := v.v.(type) {
	case []uint8:
		c.bytes(a)
	case []string:
		for _, s := range a {
			c.str(s)
		}
	case []float32:
		for _, x := range a {
			c.u32(math.Float32bits(x))
		}
	case []int32:
		for _, x := range a {
			c.u32(uint32(x))
		}
	case []uint32:
		for _, x := range a {
			c.u32(x)
		}
	case []int8:
		for _, x := range a {
			c.scalar(x)
		}
	case []bool:
		for _, x := range a {
			c.scalar(x)
		}
	case []uint16:
		for _, x := range a {
			c.scalar(x)
		}
	case []int16:
		for _, x := range a {
			c.scalar(x)
		}
	case []uint64:
		for _, x := range a {
			c.u64(x)
		}
	case []int64:
		for _, x := range a {
			c.u64(uint64(x))
		}
	case []float64:
		for _, x := range a {
			c.u64(math.Float64bits(x))
		}
	default:
		c.err = fmt.Errorf("gguf: cannot encode array %T", v.v)
	}
}

// WriteTo writes the file. It returns the number of bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	c := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	c.bytes([]byte(Magic))
	c.u32(3)
	c.u64(uint64(len(w.tensors)))
	c.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		c.str(kv.Key)
		c.value(kv.Value)
	}
	var off uint64
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = off
		off = alignUp(off+t.Size, w.alignment)
		c.str(t.Name)
		c.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			c.u64(d)
		}
		c.u32(uint32(t.Type))
		c.u64(t.Offset)
	}
	c.pad(w.alignment)
	dataStart := c.n
	var buf []byte
	for _, wt := range w.tensors {
		if c.err != nil {
			break
		}
		if uint64(cap(buf)) < wt.info.Size {
			buf = make([]byte, wt.info.Size)
		}
		b := buf[:wt.info.Size]
		clear(b)
		if err := wt.fill(b); err != nil {
			return c.n, fmt.Errorf("gguf: tensor %q: %w", wt.info.Name, err)
		}
		if uint64(c.n-dataStart) != wt.info.Offset {
			return c.n, errors.New("gguf: internal error: tensor offset mismatch")
		}
		c.bytes(b)
		c.pad(w.alignment)
	}
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.n, c.err
}

// WriteFile writes the file to path (created or truncated, mode 0644).
func (w *Writer) WriteFile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, err := w.WriteTo(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
