package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// File is a parsed GGUF file. Its tensor data alias the bytes it was parsed
// from; after Close they must not be used.
type File struct {
	Version   uint32
	KV        []KV         // in file order
	Tensors   []TensorInfo // in file order
	Alignment uint64
	// DataOffset is the file offset of the data section; tensor offsets are
	// relative to it.
	DataOffset uint64

	data    []byte
	kvIndex map[string]int
	tIndex  map[string]int
	closer  func() error
}

// maxAlignment bounds general.alignment: padding is never larger than this.
const maxAlignment = 1 << 24

type cursor struct {
	b   []byte
	off int
}

func (c *cursor) remaining() int { return len(c.b) - c.off }

func (c *cursor) need(n uint64, what string) error {
	if n > uint64(c.remaining()) {
		return fmt.Errorf("%w: truncated at byte %d reading %s (need %d bytes, %d left)", ErrFormat, c.off, what, n, c.remaining())
	}
	return nil
}

func (c *cursor) u8(what string) (uint8, error) {
	if err := c.need(1, what); err != nil {
		return 0, err
	}
	v := c.b[c.off]
	c.off++
	return v, nil
}

func (c *cursor) u16(what string) (uint16, error) {
	if err := c.need(2, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint16(c.b[c.off:])
	c.off += 2
	return v, nil
}

func (c *cursor) u32(what string) (uint32, error) {
	if err := c.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(c.b[c.off:])
	c.off += 4
	return v, nil
}

func (c *cursor) u64(what string) (uint64, error) {
	if err := c.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(c.b[c.off:])
	c.off += 8
	return v, nil
}

func (c *cursor) str(what string) (string, error) {
	n, err := c.u64(what + " length")
	if err != nil {
		return "", err
	}
	if err := c.need(n, what); err != nil {
		return "", err
	}
	s := string(c.b[c.off : c.off+int(n)])
	c.off += int(n)
	return s, nil
}

// count reads a uint64 element count and checks that count elements of at
// least minSize bytes each fit in what remains, so that no allocation sized by
// it can exceed the input.
func (c *cursor) count(minSize uint64, what string) (int, error) {
	n, err := c.u64(what)
	if err != nil {
		return 0, err
	}
	hi, lo := bits.Mul64(n, minSize)
	if hi != 0 || lo > uint64(c.remaining()) {
		return 0, fmt.Errorf("%w: %s %d cannot fit in the %d bytes that remain", ErrFormat, what, n, c.remaining())
	}
	return int(n), nil
}

// Parse parses a GGUF file held in data. The returned File aliases data.
// Every error wraps ErrFormat and names the offending field.
func Parse(data []byte) (*File, error) {
	c := &cursor{b: data}
	if err := c.need(4, "magic"); err != nil {
		return nil, err
	}
	if string(data[:4]) != Magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrFormat, data[:4])
	}
	c.off = 4
	ver, err := c.u32("version")
	if err != nil {
		return nil, err
	}
	if ver != 2 && ver != 3 {
		return nil, fmt.Errorf("%w: unsupported version %d (want 2 or 3)", ErrFormat, ver)
	}
	f := &File{Version: ver, Alignment: DefaultAlignment, data: data,
		kvIndex: map[string]int{}, tIndex: map[string]int{}}
	// Minimum encodings: a tensor info is name length (8) + n_dims (4) +
	// type (4) + offset (8); a KV is key length (8) + type (4) + 1 byte.
	nt, err := c.count(24, "tensor count")
	if err != nil {
		return nil, err
	}
	nkv, err := c.count(13, "metadata count")
	if err != nil {
		return nil, err
	}
	for i := 0; i < nkv; i++ {
		key, err := c.str(fmt.Sprintf("metadata %d key", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, fmt.Errorf("%w: duplicate metadata key %q", ErrFormat, key)
		}
		t, err := c.u32(fmt.Sprintf("type of %q", key))
		if err != nil {
			return nil, err
		}
		v, err := c.value(ValueType(t), key)
		if err != nil {
			return nil, err
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.Int()
		if !ok || v.Type() != TypeUint32 {
			return nil, fmt.Errorf("%w: general.alignment is %s, want uint32", ErrFormat, v.Type())
		}
		if a <= 0 || a > maxAlignment || a&(a-1) != 0 {
			return nil, fmt.Errorf("%w: general.alignment %d is not a power of two in [1, %d]", ErrFormat, a, maxAlignment)
		}
		f.Alignment = uint64(a)
	}
	if nt > 0 {
		f.Tensors = make([]TensorInfo, 0, nt)
	}
	for i := 0; i < nt; i++ {
		ti, err := c.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.tIndex[ti.Name]; dup {
			return nil, fmt.Errorf("%w: duplicate tensor name %q", ErrFormat, ti.Name)
		}
		f.tIndex[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	f.DataOffset = alignUp(uint64(c.off), f.Alignment)
	var dataLen uint64
	if f.DataOffset <= uint64(len(data)) {
		dataLen = uint64(len(data)) - f.DataOffset
	}
	for _, t := range f.Tensors {
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("%w: tensor %q offset %d is not a multiple of the alignment %d", ErrFormat, t.Name, t.Offset, f.Alignment)
		}
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return nil, fmt.Errorf("%w: tensor %q [%d, +%d) extends past the data section of %d bytes", ErrFormat, t.Name, t.Offset, t.Size, dataLen)
		}
	}
	sorted := make([]int, len(f.Tensors))
	for i := range sorted {
		sorted[i] = i
	}
	sort.Slice(sorted, func(a, b int) bool { return f.Tensors[sorted[a]].Offset < f.Tensors[sorted[b]].Offset })
	for k := 1; k < len(sorted); k++ {
		p, q := f.Tensors[sorted[k-1]], f.Tensors[sorted[k]]
		if p.Offset+p.Size > q.Offset {
			return nil, fmt.Errorf("%w: tensors %q and %q overlap", ErrFormat, p.Name, q.Name)
		}
	}
	return f, nil
}

func alignUp(x, a uint64) uint64 {
	if r := x % a; r != 0 {
		return x + (a - r)
	}
	return x
}

func (c *cursor) tensorInfo(i int) (TensorInfo, error) {
	var t TensorInfo
	n, err := c.u64(fmt.Sprintf("tensor %d name length", i))
	if err != nil {
		return t, err
	}
	if n > MaxNameLen {
		return t, fmt.Errorf("%w: tensor %d name is %d bytes, more than %d", ErrFormat, i, n, MaxNameLen)
	}
	c.off -= 8
	if t.Name, err = c.str(fmt.Sprintf("tensor %d name", i)); err != nil {
		return t, err
	}
	nd, err := c.u32(fmt.Sprintf("tensor %q n_dims", t.Name))
	if err != nil {
		return t, err
	}
	if nd == 0 || nd > MaxDims {
		return t, fmt.Errorf("%w: tensor %q has %d dimensions, want 1 to %d", ErrFormat, t.Name, nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	elems := uint64(1)
	for d := range t.Dims {
		if t.Dims[d], err = c.u64(fmt.Sprintf("tensor %q dim %d", t.Name, d)); err != nil {
			return t, err
		}
		hi, lo := bits.Mul64(elems, t.Dims[d])
		if hi != 0 || lo > math.MaxInt64/8 {
			return t, fmt.Errorf("%w: tensor %q element count overflows", ErrFormat, t.Name)
		}
		elems = lo
	}
	typ, err := c.u32(fmt.Sprintf("tensor %q type", t.Name))
	if err != nil {
		return t, err
	}
	t.Type = TensorType(typ)
	if !t.Type.Known() {
		return t, fmt.Errorf("%w: tensor %q has unknown type %d", ErrFormat, t.Name, typ)
	}
	if t.Dims[0]%t.Type.BlockSize() != 0 {
		return t, fmt.Errorf("%w: tensor %q row of %d elements is not a whole number of %s blocks (%d)", ErrFormat, t.Name, t.Dims[0], t.Type, t.Type.BlockSize())
	}
	if t.Size, err = t.Type.RowSize(elems); err != nil {
		return t, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if t.Offset, err = c.u64(fmt.Sprintf("tensor %q offset", t.Name)); err != nil {
		return t, err
	}
	return t, nil
}

func (c *cursor) value(t ValueType, key string) (Value, error) {
	what := fmt.Sprintf("value of %q", key)
	switch t {
	case TypeUint8:
		x, err := c.u8(what)
		return Value{typ: t, v: x}, err
	case TypeInt8:
		x, err := c.u8(what)
		return Value{typ: t, v: int8(x)}, err
	case TypeBool:
		x, err := c.u8(what)
		if err == nil && x > 1 {
			err = fmt.Errorf("%w: %s is bool %d, want 0 or 1", ErrFormat, what, x)
		}
		return Value{typ: t, v: x == 1}, err
	case TypeUint16:
		x, err := c.u16(what)
		return Value{typ: t, v: x}, err
	case TypeInt16:
		x, err := c.u16(what)
		return Value{typ: t, v: int16(x)}, err
	case TypeUint32:
		x, err := c.u32(what)
		return Value{typ: t, v: x}, err
	case TypeInt32:
		x, err := c.u32(what)
		return Value{typ: t, v: int32(x)}, err
	case TypeFloat32:
		x, err := c.u32(what)
		return Value{typ: t, v: math.Float32frombits(x)}, err
	case TypeUint64:
		x, err := c.u64(what)
		return Value{typ: t, v: x}, err
	case TypeInt64:
		x, err := c.u64(what)
		return Value{typ: t, v: int64(x)}, err
	case TypeFloat64:
		x, err := c.u64(what)
		return Value{typ: t, v: math.Float64frombits(x)}, err
	case TypeString:
		s, err := c.str(what)
		return Value{typ: t, v: s}, err
	case TypeArray:
		return c.array(key)
	}
	return Value{}, fmt.Errorf("%w: %q has unknown value type %d", ErrFormat, key, uint32(t))
}

func (c *cursor) array(key string) (Value, error) {
	et32, err := c.u32(fmt.Sprintf("element type of %q", key))
	if err != nil {
		return Value{}, err
	}
	et := ValueType(et32)
	size := uint64(et.size())
	switch {
	case et == TypeString:
		size = 8
	case et == TypeArray:
		return Value{}, fmt.Errorf("%w: %q is an array of arrays, which is not supported", ErrFormat, key)
	case size == 0:
		return Value{}, fmt.Errorf("%w: %q is an array of unknown type %d", ErrFormat, key, et32)
	}
	n, err := c.count(size, fmt.Sprintf("length of %q", key))
	if err != nil {
		return Value{}, err
	}
	v := Value{typ: TypeArray, elem: et}
	b := c.b[c.off:]
	le := binary.LittleEndian
	switch et {
	case TypeUint8:
		v.v = append([]uint8(nil), b[:n]...)
	case TypeInt8:
		a := make([]int8, n)
		for i := range a {
			a[i] = int8(b[i])
		}
		v.v = a
	case TypeBool:
		a := make([]bool, n)
		for i := range a {
			if b[i] > 1 {
				return Value{}, fmt.Errorf("%w: %q[%d] is bool %d, want 0 or 1", ErrFormat, key, i, b[i])
			}
			a[i] = b[i] == 1
		}
		v.v = a
	case TypeUint16:
		a := make([]uint16, n)
		for i := range a {
			a[i] = le.Uint16(b[2*i:])
		}
		v.v = a
	case TypeInt16:
		a := make([]int16, n)
		for i := range a {
			a[i] = int16(le.Uint16(b[2*i:]))
		}
		v.v = a
	case TypeUint32:
		a := make([]uint32, n)
		for i := range a {
			a[i] = le.Uint32(b[4*i:])
		}
		v.v = a
	case TypeInt32:
		a := make([]int32, n)
		for i := range a {
			a[i] = int32(le.Uint32(b[4*i:]))
		}
		v.v = a
	case TypeFloat32:
		a := make([]float32, n)
		for i := range a {
			a[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		v.v = a
	case TypeUint64:
		a := make([]uint64, n)
		for i := range a {
			a[i] = le.Uint64(b[8*i:])
		}
		v.v = a
	case TypeInt64:
		a := make([]int64, n)
		for i := range a {
			a[i] = int64(le.Uint64(b[8*i:]))
		}
		v.v = a
	case TypeFloat64:
		a := make([]float64, n)
		for i := range a {
			a[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		v.v = a
	case TypeString:
		a := make([]string, n)
		for i := range a {
			if a[i], err = c.str(fmt.Sprintf("%q[%d]", key, i)); err != nil {
				return Value{}, err
			}
		}
		v.v = a
		return v, nil
	}
	c.off += n * int(size)
	return v, nil
}

// Get returns the metadata value stored under key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// String returns the string stored under key; false if it is absent or not a
// string.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return "", false
	}
	return v.Str()
}

// Int returns the integer stored under key (any integer width).
func (f *File) Int(key string) (int64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return v.Int()
}

// Float returns the number stored under key as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return v.Float()
}

// Bool returns the bool stored under key.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Get(key)
	if !ok {
		return false, false
	}
	return v.Bool()
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Data returns the bytes of tensor t, which must come from f.Tensors. The
// slice aliases the file: read-only, and invalid after Close.
func (f *File) Data(t TensorInfo) []byte {
	start := f.DataOffset + t.Offset
	return f.data[start : start+t.Size : start+t.Size]
}

// Close releases the file's mapping, if any. It is safe to call twice.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer()
	f.closer = nil
	f.data = nil
	return err
}
