package api

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/service"
)

// exportFormats maps an export route's format to the file of the signed
// export it answers ("zip": every file and the manifest, what
// POST /compliance/v1/export/verify checks).
var exportFormats = map[string]struct{ file, ctype string }{
	"pdf":   {"register.pdf", "application/pdf"},
	"csv":   {"register.csv", "text/csv; charset=utf-8"},
	"jsonl": {"ledger.jsonl", "application/jsonl"},
	"zip":   {"", "application/zip"},
}

// ErrExportFormat: a format the export route does not serve.
var ErrExportFormat = cloison.NewError(cloison.CodeInvalid, "format: want pdf, csv, jsonl or zip")

// maxExportVerify bounds the export a verification reads (compressed and
// unpacked alike).
const maxExportVerify = 256 << 20

// exportManifestHeader carries the signed manifest (base64 of
// manifest.txt) beside a single-file export.
const exportManifestHeader = "Cloison-Export-Manifest"

// exportRegister serves GET /compliance/v1/export?format=pdf|csv|jsonl|zip
// [&from=N&to=M]: a signed export (service.Compliance.Export, ledgered as
// cloisonctl audit export is) answered as one file, or as a ZIP of the
// whole export directory.
func (s *Server) exportRegister(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "format" && k != "from" && k != "to" {
			WriteHTTPError(w, service.ErrInvalidField.Withf("unknown query parameter %q", k))
			return
		}
	}
	format := q.Get("format")
	if format == "" {
		format = "zip"
	}
	f, ok := exportFormats[format]
	if !ok {
		WriteHTTPError(w, ErrExportFormat)
		return
	}
	var from, to uint64
	for _, v := range []struct {
		name string
		dst  *uint64
	}{{"from", &from}, {"to", &to}} {
		if s := q.Get(v.name); s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				WriteHTTPError(w, service.ErrInvalidField.Withf("%s: not a sequence number", v.name))
				return
			}
			*v.dst = n
		}
	}
	tmp, err := os.CreateTemp("", "cloison-export-*")
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var zw *zip.Writer
	if f.file == "" {
		zw = zip.NewWriter(tmp)
	}
	var manifest []byte
	found := false
	err = s.ops.compliance.Export(r.Context(), principal(r), s.actor(r), from, to, func(name, path string) error {
		if name == export.ManifestName {
			b, err := os.ReadFile(path)
			manifest = b
			if err != nil {
				return err
			}
		}
		if zw == nil && name != f.file {
			return nil
		}
		found = true
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		var dst io.Writer = tmp
		if zw != nil {
			if dst, err = zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Unix(0, 0).UTC()}); err != nil {
				return err
			}
		}
		_, err = io.Copy(dst, src)
		return err
	})
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err == nil && !found {
		err = fmt.Errorf("export: %s missing", f.file)
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		WriteHTTPError(w, err)
		return
	}
	name := "cloison-export." + format
	w.Header().Set("Content-Type", f.ctype)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if manifest != nil {
		w.Header().Set(exportManifestHeader, base64.StdEncoding.EncodeToString(manifest))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, tmp)
}

// zipEntryName is a file name an export holds (no folder, no dot first).
var zipEntryName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ErrExportArchive: a verification body that is not a ZIP of an export
// directory.
var ErrExportArchive = cloison.NewError(cloison.CodeInvalid, "body: want the ZIP of an export (GET /compliance/v1/export?format=zip)")

// verifyExport serves POST /compliance/v1/export/verify: the body is the
// ZIP of an export, or one file of it with its signed manifest (base64) in
// the Cloison-Export-Manifest header as the export route answered it; the
// answer is service.ExportVerification (200 whether or not it verifies).
func (s *Server) verifyExport(w http.ResponseWriter, r *http.Request) {
	if mh := r.Header.Get(exportManifestHeader); mh != "" {
		manifest, err := base64.StdEncoding.DecodeString(mh)
		if err != nil {
			WriteHTTPError(w, service.ErrInvalidField.Withf("%s: not base64", exportManifestHeader))
			return
		}
		h := sha256.New()
		n, err := io.Copy(h, io.LimitReader(r.Body, maxExportVerify+1))
		if err != nil {
			WriteHTTPError(w, ErrExportArchive)
			return
		}
		if n > maxExportVerify {
			WriteHTTPError(w, ErrBodyTooLarge)
			return
		}
		var sum audit.Digest
		copy(sum[:], h.Sum(nil))
		res, err := s.ops.compliance.VerifyExportFile(r.Context(), principal(r), manifest, n, sum)
		if err != nil {
			WriteHTTPError(w, err)
			return
		}
		writeJSON(w, 200, res)
		return
	}
	tmp, err := os.CreateTemp("", "cloison-verify-*.zip")
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, io.LimitReader(r.Body, maxExportVerify+1))
	if err != nil {
		WriteHTTPError(w, ErrExportArchive)
		return
	}
	if n > maxExportVerify {
		WriteHTTPError(w, ErrBodyTooLarge)
		return
	}
	zr, err := zip.NewReader(tmp, n)
	if err != nil {
		WriteHTTPError(w, ErrExportArchive)
		return
	}
	dir, err := os.MkdirTemp("", "cloison-verify-")
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	defer os.RemoveAll(dir)
	var total int64
	for _, zf := range zr.File {
		if !zipEntryName.MatchString(zf.Name) {
			WriteHTTPError(w, ErrExportArchive.Withf("entry %q is not a file an export holds", zf.Name))
			return
		}
		err := func() error {
			rc, err := zf.Open()
			if err != nil {
				return err
			}
			defer rc.Close()
			out, err := os.OpenFile(filepath.Join(dir, zf.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			defer out.Close()
			m, err := io.Copy(out, io.LimitReader(rc, maxExportVerify-total+1))
			total += m
			if err == nil && total > maxExportVerify {
				err = ErrBodyTooLarge
			}
			return err
		}()
		if errors.Is(err, ErrBodyTooLarge) {
			WriteHTTPError(w, err)
			return
		}
		if err != nil {
			WriteHTTPError(w, ErrExportArchive)
			return
		}
	}
	res, err := s.ops.compliance.VerifyExport(r.Context(), principal(r), dir)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, res)
}
