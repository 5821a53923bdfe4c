package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// sample builds a small valid file covering every value type, two tensors and
// a non-default alignment.
func sample(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Set("general.architecture", "llama"))
	must(w.Set("general.alignment", uint32(64)))
	must(w.Set("u8", uint8(200)))
	must(w.Set("i8", int8(-5)))
	must(w.Set("u16", uint16(65000)))
	must(w.Set("i16", int16(-30000)))
	must(w.Set("u32", uint32(4000000000)))
	must(w.Set("i32", int32(-2000000000)))
	must(w.Set("f32", float32(1.5)))
	must(w.Set("bool", true))
	must(w.Set("u64", uint64(math.MaxUint64)))
	must(w.Set("i64", int64(math.MinInt64)))
	must(w.Set("f64", math.Pi))
	must(w.Set("strs", []string{"a", "", "ünï"}))
	must(w.Set("f32s", []float32{1, -2, 3.25}))
	must(w.Set("i32s", []int32{1, -1}))
	must(w.Set("u8s", []uint8{1, 2, 3}))
	must(w.Set("bools", []bool{true, false}))
	must(w.Set("i64s", []int64{-7}))
	must(w.Set("f64s", []float64{0.5}))
	must(w.Set("u16s", []uint16{9}))
	must(w.Set("i16s", []int16{-9}))
	must(w.Set("u32s", []uint32{10}))
	must(w.Set("u64s", []uint64{11}))
	must(w.Set("i8s", []int8{-12}))
	a := make([]byte, 4*3*2)
	for i := range a {
		a[i] = byte(i)
	}
	must(w.AddTensor("a", F32, []uint64{3, 2}, a))
	q := make([]byte, 34*2)
	q[0] = 7
	must(w.AddTensor("q", Q8_0, []uint64{32, 2}, q))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := sample(t)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"general.architecture": "llama", "general.alignment": uint32(64), "u8": uint8(200), "i8": int8(-5),
		"u16": uint16(65000), "i16": int16(-30000), "u32": uint32(4000000000), "i32": int32(-2000000000),
		"f32": float32(1.5), "bool": true, "u64": uint64(math.MaxUint64), "i64": int64(math.MinInt64),
		"f64": math.Pi, "strs": []string{"a", "", "ünï"}, "f32s": []float32{1, -2, 3.25},
		"i32s": []int32{1, -1}, "u8s": []uint8{1, 2, 3}, "bools": []bool{true, false},
		"i64s": []int64{-7}, "f64s": []float64{0.5}, "u16s": []uint16{9}, "i16s": []int16{-9},
		"u32s": []uint32{10}, "u64s": []uint64{11}, "i8s": []int8{-12},
	}
	if len(f.KV) != len(want) {
		t.Fatalf("got %d keys, want %d", len(f.KV), len(want))
	}
	for k, w := range want {
		t.Run(k, func(t *testing.T) {
			v, ok := f.Get(k)
			if !ok {
				t.Fatalf("key %q missing", k)
			}
			if !reflect.DeepEqual(v.Any(), w) {
				t.Errorf("got %#v, want %#v", v.Any(), w)
			}
		})
	}
	if f.KV[0].Key != "general.architecture" {
		t.Errorf("got first key %q, want general.architecture (file order kept)", f.KV[0].Key)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("got alignment %d data offset %d, want 64 and a multiple of it", f.Alignment, f.DataOffset)
	}
	ta, _ := f.Tensor("a")
	if !reflect.DeepEqual(ta.Dims, []uint64{3, 2}) || ta.Type != F32 || ta.Size != 24 || ta.Offset != 0 {
		t.Errorf("got tensor a %+v", ta)
	}
	if d := f.Data(ta); d[5] != 5 || len(d) != 24 {
		t.Errorf("got tensor a data %v", d)
	}
	tq, _ := f.Tensor("q")
	if tq.Offset != 64 || tq.Size != 68 || f.Data(tq)[0] != 7 {
		t.Errorf("got tensor q %+v, want offset 64 (aligned) size 68", tq)
	}
	if uint64(len(data)) != f.DataOffset+tq.Offset+128 {
		t.Errorf("got file size %d, want the last tensor padded to the alignment", len(data))
	}
	if s, _ := f.String("general.architecture"); s != "llama" {
		t.Errorf("got %q", s)
	}
	if i, ok := f.Int("u32"); !ok || i != 4000000000 {
		t.Errorf("Int(u32) = %d %v", i, ok)
	}
	if _, ok := f.Int("u64"); ok {
		t.Error("Int(u64 max) succeeded, want overflow refusal")
	}
}

func TestOpenMmapAndClose(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, sample(t), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	ta, _ := f.Tensor("a")
	if f.Data(ta)[7] != 7 {
		t.Error("mapped data wrong")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "e.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); !errors.Is(err, ErrFormat) {
		t.Errorf("got %v, want ErrFormat for an empty file", err)
	}
}

// header returns a file prefix: magic, version, counts.
func header(ver uint32, nt, nkv uint64) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, ver)
	b = binary.LittleEndian.AppendUint64(b, nt)
	return binary.LittleEndian.AppendUint64(b, nkv)
}

func str(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

func tensor(b []byte, name string, dims []uint64, typ uint32, off uint64) []byte {
	b = str(b, name)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(dims)))
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	b = binary.LittleEndian.AppendUint32(b, typ)
	return binary.LittleEndian.AppendUint64(b, off)
}

func padTo(b []byte, a int) []byte {
	for len(b)%a != 0 {
		b = append(b, 0)
	}
	return b
}

func TestHostile(t *testing.T) {
	le := binary.LittleEndian
	kv := func(key string, typ uint32, payload ...byte) []byte {
		b := str(nil, key)
		b = le.AppendUint32(b, typ)
		return append(b, payload...)
	}
	u64 := func(x uint64) []byte { return le.AppendUint64(nil, x) }
	u32 := func(x uint32) []byte { return le.AppendUint32(nil, x) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	twoTensors := func(off2 uint64) []byte {
		b := header(3, 2, 0)
		b = tensor(b, "x", []uint64{8}, 0, 0)
		b = tensor(b, "y", []uint64{8}, 0, off2)
		return append(padTo(b, 32), make([]byte, 64)...)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short magic", []byte("GG")},
		{"bad magic", cat([]byte("GGML"), u32(3), u64(0), u64(0))},
		{"version 1", header(1, 0, 0)},
		{"version 4", header(4, 0, 0)},
		{"truncated counts", header(3, 0, 0)[:15]},
		{"huge tensor count", header(3, 1<<62, 0)},
		{"huge kv count", header(3, 0, math.MaxUint64)},
		{"kv count past end", header(3, 0, 2)},
		{"key length huge", cat(header(3, 0, 1), u64(math.MaxUint64))},
		{"key length past end", cat(header(3, 0, 1), u64(100), []byte("ab"))},
		{"unknown value type", cat(header(3, 0, 1), kv("k", 13, 0, 0, 0, 0))},
		{"truncated u64 value", cat(header(3, 0, 1), kv("k", 10, 1, 2, 3))},
		{"bool 2", cat(header(3, 0, 1), kv("k", 7, 2))},
		{"string length huge", cat(header(3, 0, 1), kv("k", 8), u64(1<<63))},
		{"array huge count", cat(header(3, 0, 1), kv("k", 9), u32(4), u64(1<<61))},
		{"array count overflow", cat(header(3, 0, 1), kv("k", 9), u32(10), u64(1<<61+1))},
		{"array of strings past end", cat(header(3, 0, 1), kv("k", 9), u32(8), u64(3), u64(1), []byte("a"))},
		{"array of arrays", cat(header(3, 0, 1), kv("k", 9), u32(9), u64(0))},
		{"array unknown elem", cat(header(3, 0, 1), kv("k", 9), u32(77), u64(0))},
		{"array bool 3", cat(header(3, 0, 1), kv("k", 9), u32(7), u64(1), []byte{3})},
		{"duplicate key", cat(header(3, 0, 2), kv("k", 0, 1), kv("k", 0, 2))},
		{"alignment not power of two", cat(header(3, 0, 1), kv("general.alignment", 4), u32(48))},
		{"alignment zero", cat(header(3, 0, 1), kv("general.alignment", 4), u32(0))},
		{"alignment wrong type", cat(header(3, 0, 1), kv("general.alignment", 10), u64(32))},
		{"tensor name too long", tensor(header(3, 1, 0), string(make([]byte, 64)), []uint64{1}, 0, 0)},
		{"tensor zero dims", tensor(header(3, 1, 0), "t", nil, 0, 0)},
		{"tensor five dims", tensor(header(3, 1, 0), "t", []uint64{1, 1, 1, 1, 1}, 0, 0)},
		{"tensor dims overflow", tensor(header(3, 1, 0), "t", []uint64{1 << 32, 1 << 32}, 0, 0)},
		{"tensor dims overflow size", tensor(header(3, 1, 0), "t", []uint64{1 << 31, 1 << 30}, 0, 0)},
		{"tensor unknown type", padTo(tensor(header(3, 1, 0), "t", []uint64{4}, 4, 0), 32)},
		{"tensor type 99", padTo(tensor(header(3, 1, 0), "t", []uint64{4}, 99, 0), 32)},
		{"tensor partial block", padTo(tensor(header(3, 1, 0), "t", []uint64{33}, 8, 0), 32)},
		{"tensor past end", append(padTo(tensor(header(3, 1, 0), "t", []uint64{16}, 0, 0), 32), make([]byte, 63)...)},
		{"tensor offset overflow", append(padTo(tensor(header(3, 1, 0), "t", []uint64{8}, 0, math.MaxUint64-31), 32), make([]byte, 32)...)},
		{"tensor misaligned", append(padTo(tensor(header(3, 1, 0), "t", []uint64{1}, 0, 4), 32), make([]byte, 64)...)},
		{"tensors overlap", twoTensors(0)},
		{"duplicate tensor", func() []byte {
			b := header(3, 2, 0)
			b = tensor(b, "x", []uint64{8}, 0, 0)
			b = tensor(b, "x", []uint64{8}, 0, 32)
			return append(padTo(b, 32), make([]byte, 64)...)
		}()},
		{"truncated tensor info", tensor(header(3, 1, 0), "t", []uint64{8}, 0, 0)[:40]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.data)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("got %v, %v; want an error wrapping ErrFormat", f, err)
			}
		})
	}
	// The control case: the same two tensors without overlap parse.
	if _, err := Parse(twoTensors(32)); err != nil {
		t.Errorf("valid two-tensor file: got %v, want nil", err)
	}
}

func TestTruncationsOfValidFile(t *testing.T) {
	data := sample(t)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := f.Tensor("q")
	end := int(f.DataOffset + q.Offset + q.Size) // trailing padding may be absent
	for n := 0; n < end; n++ {
		if _, err := Parse(data[:n]); err == nil {
			t.Fatalf("prefix of %d/%d bytes parsed without error", n, len(data))
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("prefix %d: got %v, want ErrFormat", n, err)
		}
	}
}

func TestWriterRejects(t *testing.T) {
	w := NewWriter()
	tests := []struct {
		name string
		err  error
	}{
		{"bad alignment", w.Set("general.alignment", uint32(3))},
		{"alignment int", w.Set("general.alignment", 32)},
		{"unsupported go type", w.Set("k", struct{}{})},
		{"partial block", w.AddTensor("t", Q8_0, []uint64{16}, make([]byte, 17))},
		{"long name", w.AddTensor(string(make([]byte, 64)), F32, []uint64{1}, make([]byte, 4))},
		{"unknown type", w.AddTensor("t", TensorType(5), []uint64{1}, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Error("got nil error, want a refusal")
			}
		})
	}
	if err := w.AddTensor("x", F32, []uint64{2}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("wrong-sized data: got nil error from WriteTo")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	f.Add(header(3, 0, 0))
	f.Add(header(2, 1, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		for _, ti := range file.Tensors {
			d := file.Data(ti)
			if uint64(len(d)) != ti.Size {
				t.Fatalf("tensor %q: got %d bytes, want %d", ti.Name, len(d), ti.Size)
			}
		}
		// A parsed file survives a write/parse round trip of its metadata.
		w := NewWriter()
		for _, kv := range file.KV {
			if err := w.Set(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		g, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		w2 := NewWriter()
		for _, kv := range g.KV {
			w2.Set(kv.Key, kv.Value)
		}
		var buf2 bytes.Buffer
		w2.WriteTo(&buf2)
		if !bytes.Equal(buf.Bytes(), buf2.Bytes()) || len(g.KV) != len(file.KV) {
			t.Fatal("metadata changed in round trip")
		}
	})
}
