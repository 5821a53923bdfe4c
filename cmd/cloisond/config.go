package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// The --config file is a JSON object of {"flag-name": value}; each value has
// its flag's own type: a JSON number for integer flags (kv-pages: 1048576), a
// bool for bool flags, a string such as "30s" for durations, a string for
// string flags, a list of strings for the repeatable flags (repeatable) and
// for the comma-separated ones (commaLists; a single string is taken as the
// flag would take it). Any other type, and any key that is not a flag, is
// refused with an error naming the key.

// repeatable are the flags given once per value (--witness A --witness B).
var repeatable = map[string]bool{"trust-jwks": true, "trust-log-key": true, "witness": true, "model": true}

// commaLists are the flags whose one value is a comma-separated list.
var commaLists = map[string]bool{"prefill-peers": true, "decode-peers": true}

// flagKind names the type a flag's value has in the --config file.
func flagKind(f *flag.Flag) string {
	switch {
	case repeatable[f.Name]:
		return "list of strings (repeatable)"
	case commaLists[f.Name]:
		return "list of strings"
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			return "bool"
		case int, int64, uint, uint64:
			return "integer"
		case float64:
			return "number"
		case time.Duration:
			return "duration"
		}
	}
	return "string"
}

// configValues reads the --config file at path into the flag values to set,
// in file order per key (a repeatable flag's list gives several). Errors name
// the file and the key.
func configValues(fs *flag.FlagSet, path string) (map[string][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the JSON object", path)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: want a JSON object of {\"flag-name\": value}", path)
	}
	out := map[string][]string{}
	for k, raw := range m {
		f := fs.Lookup(k)
		if f == nil || k == "config" {
			return nil, fmt.Errorf("%s: unknown setting %q", path, k)
		}
		vals, err := configValue(flagKind(f), raw)
		if err != nil {
			return nil, fmt.Errorf("%s: setting %q: %w", path, k, err)
		}
		out[k] = vals
	}
	return out, nil
}

// configValue turns one JSON value into the flag text(s) for a flag of kind.
func configValue(kind string, raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	want := func() error { return fmt.Errorf("want a JSON %s, got %s", kind, jsonType(v)) }
	switch kind {
	case "bool":
		if b, ok := v.(bool); ok {
			return []string{fmt.Sprint(b)}, nil
		}
	case "integer", "number":
		if n, ok := v.(json.Number); ok {
			if _, err := n.Int64(); err != nil && kind == "integer" {
				return nil, fmt.Errorf("want an integer, got %s", n)
			}
			return []string{n.String()}, nil
		}
	case "duration":
		if s, ok := v.(string); ok {
			return []string{s}, nil
		}
		return nil, fmt.Errorf("want a duration string such as \"30s\", got %s", jsonType(v))
	case "string":
		if s, ok := v.(string); ok {
			return []string{s}, nil
		}
	default: // lists
		if s, ok := v.(string); ok {
			return []string{s}, nil
		}
		l, ok := v.([]any)
		if !ok {
			return nil, want()
		}
		var strs []string
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: want a string, got %s", i, jsonType(e))
			}
			strs = append(strs, s)
		}
		if !strings.HasSuffix(kind, "(repeatable)") {
			return []string{strings.Join(strs, ",")}, nil
		}
		return strs, nil
	}
	return nil, want()
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	}
	return "object"
}

// envDefaults are the flags whose default is an environment variable; the
// reference names the variable, not this machine's value.
var envDefaults = map[string]string{"database-url": "DATABASE_URL"}

// configReference writes the configuration reference (CONFIG.md, make
// config-doc) from the flag definitions.
func configReference(w io.Writer) error {
	var fs *flag.FlagSet
	if _, err := parseFlagsInto([]string{"--database-url", "postgres://reference", "--dev"}, func(f *flag.FlagSet) { fs = f }); err != nil {
		return err
	}
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" { // the file itself: a flag only
			flags = append(flags, f)
		}
	})
	slices.SortFunc(flags, func(a, b *flag.Flag) int { return strings.Compare(a.Name, b.Name) })
	fmt.Fprint(w, "# cloisond configuration reference\n\n"+
		"Generated by `make config-doc` from the flag definitions (cmd/cloisond); do not edit.\n\n"+
		"Every setting is a flag (`--name value`), an environment variable (`CLOISON_NAME`, dashes as\n"+
		"underscores) and a key of the `--config` JSON file, whose value has the type listed: a JSON\n"+
		"number for integers, `true`/`false` for bools, a string such as `\"30s\"` for durations, a list\n"+
		"of strings for repeatable and comma-separated flags. Flags beat the environment, which beats\n"+
		"the file; a key that is not a setting, or a value of another type, fails the start.\n\n"+
		"| Setting | Type | Default | Description |\n|---|---|---|---|\n")
	for _, f := range flags {
		def := f.DefValue
		if env, ok := envDefaults[f.Name]; ok {
			def = "$" + env
		}
		if def != "" {
			def = "`" + def + "`"
		}
		usage := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(f.Usage)
		_, err := fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", f.Name, flagKind(f), def, usage)
		if err != nil {
			return err
		}
	}
	return nil
}
