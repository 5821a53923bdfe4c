//go:build !faults

package cloison_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/node/prefill"
)

// In the default build no defence can be switched off:
// the test-only switch types have no fields (they exist only with the faults
// build tag), and no configuration type a server builds carries a field,
// however deep, that names a skipped check or an unsafe mode. A server
// binary is a default build; `make test` runs the ablation suites that flip
// defences with -tags faults.
func TestDefaultBuildCannotSwitchADefenceOff(t *testing.T) {
	for _, sw := range []any{isolation.Unsafe{}, kernels.Unsafe{}, engine.Unsafe{}, transfer.ReceiverUnsafe{}, transfer.SenderUnsafe{},
		node.AttestUnsafe{}} {
		if n := reflect.TypeOf(sw).NumField(); n != 0 {
			t.Errorf("%T: got %d fields, want 0 in the default build", sw, n)
		}
	}
	for _, cfg := range []any{isolation.Config{}, kernels.Options{}, engine.Config{}, engine.AdmissionConfig{}, engine.SchedulerConfig{},
		engine.Remote{}, engine.PrefillRunner{}, transfer.ReceiverConfig{}, transfer.SenderConfig{},
		node.Config{}, node.Decode{}, node.Spec{}, node.DecodeSpec{}, prefill.Config{}, prefill.Spec{}} {
		walk(t, reflect.TypeOf(cfg), reflect.TypeOf(cfg).String(), map[reflect.Type]bool{})
	}
}

// attestationType is the verdict a node's capacity attestation reaches.
var attestationType = reflect.TypeOf(attest.Attestation{})

// walk fails on a settable field whose name says it turns a check off, and
// on a function field that returns an attestation: a caller-supplied
// function in place of attest.Capacity or attest.Prefill could start a node
// whose pool cannot hold the context it serves (the node's attestation
// seams live behind the faults tag, node.AttestUnsafe).
func walk(t *testing.T, typ reflect.Type, path string, seen map[reflect.Type]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || seen[typ] {
		return
	}
	seen[typ] = true
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name := strings.ToLower(f.Name)
		empty := f.Type.Kind() == reflect.Struct && f.Type.NumField() == 0
		if !empty && (strings.HasPrefix(name, "unsafe") || strings.HasPrefix(name, "skip")) {
			t.Errorf("%s.%s (%s): a defence switch in the default build", path, f.Name, f.Type)
		}
		if f.Type.Kind() == reflect.Func {
			for o := range f.Type.NumOut() {
				if f.Type.Out(o) == attestationType {
					t.Errorf("%s.%s (%s): a function that decides the attestation, a defence switch in the default build", path, f.Name, f.Type)
				}
			}
		}
		walk(t, f.Type, path+"."+f.Name, seen)
	}
}
