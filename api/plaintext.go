package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
)

// ErrControlCharacters: an admin or compliance string holds a control
// character other than tab and newline.
var ErrControlCharacters = cloison.NewError(cloison.CodeInvalid, "a text field holds a control character (only tab and newline are allowed)")

// plainText reports whether s holds no control character but tab and
// newline: NUL is refused by the database (a 500 before this), and ESC,
// CR and the C1 controls would reach an operator's terminal (the CLI) and
// the notification drafts as terminal commands or overwritten lines.
func plainText(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return r != '\t' && r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0))
	}) < 0
}

// plainJSON reports whether every string of JSON text b, keys included,
// is plainText. Text that is not JSON is left to the handler to refuse.
func plainJSON(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if err != nil {
			return true
		}
		if s, ok := tok.(string); ok && !plainText(s) {
			return false
		}
	}
}

// plainBody refuses (ErrControlCharacters, 400) a request whose JSON body
// holds a string with a control character, before h stores anything. It
// reads at most limit+1 bytes; the handler reads the body as sent and
// applies its own limit.
func plainBody(h http.HandlerFunc, limit int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err == nil && !plainJSON(b) {
			WriteHTTPError(w, ErrControlCharacters)
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		h.ServeHTTP(w, r)
	}
}

// plainMessage reports whether every string of m (nested messages, lists
// and map keys and values included) is plainText.
func plainMessage(m protoreflect.Message) bool {
	ok := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && ok; i++ {
				ok = plainValue(fd, l.Get(i))
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				ok = plainText(k.String()) && plainValue(fd.MapValue(), mv)
				return ok
			})
		default:
			ok = plainValue(fd, v)
		}
		return ok
	})
	return ok
}

func plainValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return plainText(v.String())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return plainMessage(v.Message())
	}
	return true
}

// plainMethod reports whether method's request strings must be plainText:
// the admin and compliance services', except the policy reload (policy
// files are code, and may have CRLF line ends).
func plainMethod(method string) bool {
	if method == adminv1.AdminService_ReloadPolicies_FullMethodName || method == adminv1.AdminService_ReloadPoliciesStream_FullMethodName {
		return false
	}
	return strings.HasPrefix(method, "/cloison.admin.v1.") || strings.HasPrefix(method, "/cloison.compliance.v1.")
}

func plainRequest(method string, m any) error {
	if pm, ok := m.(proto.Message); ok && plainMethod(method) && !plainMessage(pm.ProtoReflect()) {
		return ErrControlCharacters
	}
	return nil
}
