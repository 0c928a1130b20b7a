package patches

import (
	"bytes"
	"encoding/json"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "k8s.io/autoscaler/cluster-autoscaler"

// mayTouch lists every upstream file a patch may change, and why. The
// autoscaler is upstream's: a patch that reaches further than its bug needs
// fails here.
var mayTouch = map[string]string{
	"cloudprovider/clusterapi/clusterapi_unstructured.go": "SetSize's scale patch must carry replicas 0 (kubernetes/autoscaler#8412)",
}

// The patches apply, in the Makefile's order and the Makefile's way, to the
// pinned module's source in the module cache: every hunk at the line it was
// written for (no fuzz, no offset), only to files in mayTouch, and leave
// gofmt-clean Go behind.
func TestPatchesApplyToPinnedVersion(t *testing.T) {
	patches, err := filepath.Glob("*.patch")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(patches) // the Makefile's order
	if len(patches) == 0 {
		t.Skip("no patches: the pinned cluster-autoscaler is built as upstream ships it")
	}
	src := pinnedModuleDir(t)
	work := t.TempDir()
	for _, p := range patches {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		files := touchedFiles(t, work, abs)
		if len(files) == 0 {
			t.Errorf("%s changes no file", p)
		}
		for _, f := range files {
			if _, ok := mayTouch[f]; !ok {
				t.Errorf("%s changes %s, which is not in mayTouch: patches change only what their bug needs", p, f)
				continue
			}
			// Start from upstream's file unless an earlier patch changed it.
			dst := filepath.Join(work, f)
			if _, err := os.Stat(dst); os.IsNotExist(err) {
				copyFile(t, filepath.Join(src, f), dst)
			}
		}
		if t.Failed() {
			return
		}
		out, err := gitApply(work, "--verbose", abs)
		if err != nil {
			t.Fatalf("%s does not apply to %s (pinned in ../go.mod): %v\n%s\n"+
				"If the pinned version already has the fix, delete the patch; otherwise rewrite it against this version (see ../README.md).",
				p, src, err, out)
		}
		if strings.Contains(out, "offset") {
			t.Errorf("%s applies only at other lines than it was written for; regenerate it against %s (see ../README.md):\n%s", p, src, out)
		}
		for _, f := range files {
			checkGo(t, filepath.Join(work, f))
		}
	}
}

// pinnedModuleDir is the pinned cluster-autoscaler's directory in the module
// cache, as the Makefile finds it (downloading it if needed).
func pinnedModuleDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = ".." // the wrapper module, whose go.mod holds the pin
	// Pseudo-versions of k8s.io/autoscaler are not in the checksum database.
	cmd.Env = append(os.Environ(), "GONOSUMDB=k8s.io/autoscaler")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", module, err, stderr.String())
	}
	var m struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	if m.Dir == "" {
		t.Fatalf("go mod download %s: no directory (%s)", module, m.Error)
	}
	t.Logf("%s %s in %s", module, m.Version, m.Dir)
	return m.Dir
}

// touchedFiles lists the files a patch changes, as git apply reads it.
func touchedFiles(t *testing.T, dir, patch string) []string {
	t.Helper()
	out, err := gitApply(dir, "--numstat", patch)
	if err != nil {
		t.Fatalf("reading %s: %v\n%s", patch, err, out)
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		// added <TAB> deleted <TAB> path
		if fields := strings.Split(line, "\t"); len(fields) == 3 {
			files = append(files, fields[2])
		}
	}
	return files
}

func gitApply(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"apply"}, args...)...)
	cmd.Dir = dir
	// dir is not in a repository; don't let git look above it for one.
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("the pinned module has no %s: %v", from, err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkGo fails if a patched .go file does not parse or is not gofmt-clean.
func checkGo(t *testing.T, path string) {
	t.Helper()
	if !strings.HasSuffix(path, ".go") {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), path, b, parser.AllErrors); err != nil {
		t.Errorf("patched %s does not parse: %v", path, err)
		return
	}
	if formatted, err := format.Source(b); err != nil || !bytes.Equal(formatted, b) {
		t.Errorf("patched %s is not gofmt-clean (%v)", path, err)
	}
}
