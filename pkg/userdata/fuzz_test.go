package userdata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
)

// These targets fuzz what runs in the manager itself (JSON detection and
// pass-through, the output conversion) and the sandbox's checks that are
// safe in process on small inputs (parsing, the import check, redaction).
// Evaluating arbitrary templates is the sandbox's job and is not fuzzed in
// process: it may not terminate. Long runs: docs/security.md.

// FuzzPassThrough: JSON user data comes back byte for byte, without a
// sandbox; anything else goes to one.
func FuzzPassThrough(f *testing.F) {
	for _, s := range []string{`{"ignition":{"version":"3.4.0"}}`, ` [1, 2] `, `"str"`, `null`, `{`, `local x = 1; x`, "\xff", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			if isJSON(raw) {
				t.Fatal("invalid JSON taken for JSON")
			}
			return
		}
		started := false
		r := &Renderer{started: func(int) { started = true }}
		out, err := r.Render(context.Background(), raw, map[string]string{"name": "m"}, map[string][]byte{"k": raw})
		if err != nil || !bytes.Equal(out, raw) || started {
			t.Fatalf("JSON %q: got %q, %v (sandbox started: %v)", raw, out, err, started)
		}
	})
}

var redacted = regexp.MustCompile(`^the user data is neither JSON nor a valid Jsonnet template: (error at line:column \d+:\d+(-\d+(:\d+)?)?|evaluation failed) \(details are withheld: they may contain secrets\)$`)

// FuzzTemplateChecks: parsing, the import check and the redaction of parse
// errors never panic; any import is found, and only then; a parse error
// says where, never what.
func FuzzTemplateChecks(f *testing.F) {
	for _, s := range []string{
		`local ctx = std.extVar('context'); { a: ctx.data.x }`,
		`import "/etc/passwd"`, `importstr '/etc/passwd'`, `importbin "x"`,
		`{ a: if false then import 'x' else 1 }`,
		`local s = 'import "x"'; s`, `// import "x"` + "\n1",
		`{ a: `, `'unterminated`, `[[[[[[[[[[`, `local x = 'secret-in-template'; { x: }`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		if len(tmpl) > 64<<10 {
			t.Skip("in process only for small inputs: deep nesting recurses")
		}
		node, err := jsonnet.SnippetToAST(templateName, tmpl)
		if err != nil {
			if msg := templateError(position(err)).Error(); !redacted.MatchString(msg) {
				t.Fatalf("parse error message %q says more than where", msg)
			}
			return
		}
		keyword, path, found := findImport(node)
		if found {
			if !strings.Contains(tmpl, keyword) {
				t.Fatalf("found %s %q in a template without the keyword", keyword, path)
			}
			if e := importError(keyword, path); e.Kind != KindImport || len(e.Error()) > 600 {
				t.Fatalf("import error %q", e)
			}
		}
		if !strings.Contains(tmpl, "import") && found {
			t.Fatal("an import found where there is none")
		}
	})
}

// FuzzImporter: the VM's importer reads nothing, whatever the path.
func FuzzImporter(f *testing.F) {
	for _, s := range []string{"/etc/passwd", "../../etc/shadow", "", "http://example.com/x", "\x00"} {
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, from, path string) {
		c, foundAt, err := refuseImports{}.Import(from, path)
		var refused *refusedImport
		if !errors.As(err, &refused) || refused.path != path || foundAt != "" || !reflect.DeepEqual(c, jsonnet.Contents{}) {
			t.Fatalf("Import(%q, %q) = %v, %q, %v; want it refused", from, path, c, foundAt, err)
		}
	})
}

// FuzzOutput: Jsonnet's output becomes user data as the provider always
// made it: a string as it is, anything else as compact JSON, never more
// than the limit.
func FuzzOutput(f *testing.F) {
	for _, s := range []string{`"#cloud-config\nhostname: x\n"`, "{\n   \"a\": [1, 2]\n}\n", `"<&>"`, `{"html":"<&>"}`, `1e400`, `"\ud800"`, `nul`, ``} {
		f.Add([]byte(s), 100)
	}
	f.Fuzz(func(t *testing.T, out []byte, maxBytes int) {
		if maxBytes <= 0 || maxBytes > 1<<20 {
			maxBytes = 1 << 20
		}
		got, err := userData(out, maxBytes)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindOutput || bytes.Contains([]byte(e.Error()), out) && len(out) > 8 {
				t.Fatalf("error %v for %q", err, out)
			}
			return
		}
		if len(got) > maxBytes {
			t.Fatalf("%d bytes, more than %d", len(got), maxBytes)
		}
		var s string
		if json.Unmarshal(out, &s) == nil {
			if string(got) != s {
				t.Fatalf("string output %q became %q", s, got)
			}
			return
		}
		want, err1 := decodeNumbers(out)
		have, err2 := decodeNumbers(got)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(want, have) {
			t.Fatalf("output %q became %q", out, got)
		}
	})
}

// decodeNumbers decodes JSON keeping numbers as written (1e400 is JSON too).
func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
