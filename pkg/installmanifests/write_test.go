package installmanifests

import (
	"os"
	"path/filepath"
	"testing"
)

// A secret file is its owner's only, also where a file of its name was
// there before (a second run, a copy made by hand): os.WriteFile keeps an
// existing file's mode.
func TestWriteKeepsSecretsPrivate(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"secret.yaml", "plain.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := []File{{Name: "secret.yaml", Data: []byte("token: s3cr3t\n"), Secret: true}, {Name: "plain.yaml", Data: []byte("kind: ConfigMap\n")}}
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(f.Data) {
			t.Errorf("%s: %q, want %q", f.Name, b, f.Data)
		}
		perm := st.Mode().Perm()
		if f.Secret && perm&0o077 != 0 {
			t.Errorf("%s: mode %o, want no access for group and others", f.Name, perm)
		}
		if !f.Secret && perm&0o004 == 0 {
			t.Errorf("%s: mode %o, want readable", f.Name, perm)
		}
	}
}
