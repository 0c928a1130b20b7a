package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// staticBinary builds a tiny statically linked program for this machine.
func staticBinary(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"go.mod": "module tiny\n\ngo 1.26\n", "main.go": "package main\n\nfunc main() {}\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "tiny")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// TestBuildDemo: the demo image holds the tools under /opt/demo/bin (the
// executables 0755, a directory of manifests whole), the openshift/api
// CRDs under /opt/demo/openshift-api, the binary as entrypoint running
// `demo` as root at zero by default; a dynamically linked tool or one for
// another architecture is refused, naming it (the image has no C library).
func TestBuildDemo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds a linux binary of this machine's architecture")
	}
	dir := t.TempDir()
	bin := staticBinary(t, dir)
	tools := filepath.Join(dir, "tools")
	api := filepath.Join(dir, "api")
	write := func(p string, data []byte, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(tools, "etcd"), exe, 0o755)
	write(filepath.Join(tools, "kwok-stages.yaml"), []byte("kind: Stage\n"), 0o644)
	write(filepath.Join(tools, "operator-manifests", "07_deployment.yaml"), []byte("kind: Deployment\n"), 0o644)
	for _, d := range demoCRDDirs {
		write(filepath.Join(api, d, "crd.yaml"), []byte("kind: CustomResourceDefinition\n"), 0o444)
	}
	o := Options{Binary: bin, Arch: runtime.GOARCH, Created: time.Unix(1700000000, 0).UTC(), RefName: "machine-api-provider-demo:latest"}
	d := DemoOptions{Binary: bin, Arch: runtime.GOARCH, ToolsDir: tools, Tools: []string{"etcd", "kwok-stages.yaml", "operator-manifests"}, OpenShiftAPI: api}
	img, err := BuildDemo(o, d, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "0:0" || !slices.Equal(c.Entrypoint, []string{BinaryPath, "demo", "--bin-dir", DemoBinDir, "--openshift-api", DemoOpenShiftAPIDir}) || !slices.Equal(c.Cmd, []string{"--keep=false"}) {
		t.Errorf("config: user %q, entrypoint %v, cmd %v", c.User, c.Entrypoint, c.Cmd)
	}
	files, _ := flatten(t, img)
	for name, mode := range map[string]int64{
		"machine-api-provider":                               0o755,
		"opt/demo/bin/etcd":                                  0o755,
		"opt/demo/bin/kwok-stages.yaml":                      0o644,
		"opt/demo/bin/operator-manifests/07_deployment.yaml": 0o644,
		"opt/demo/openshift-api/machine/v1beta1/zz_generated.crd-manifests/crd.yaml": 0o644,
		"opt/demo/openshift-api/config/v1/zz_generated.crd-manifests/crd.yaml":       0o644,
		"tmp": 0o1777,
	} {
		h, ok := files[name]
		if !ok {
			t.Errorf("no %s in the image", name)
		} else if h.Mode != mode || !h.ModTime.Equal(o.Created) {
			t.Errorf("%s: mode %o, mtime %v", name, h.Mode, h.ModTime)
		}
	}

	// A dynamically linked tool (this machine's sh, most likely) or one of
	// another architecture is refused.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	sh, _ = filepath.EvalSymlinks(sh)
	dyn, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(tools, "etcd"), dyn, 0o755)
	if _, err := BuildDemo(o, d, t.TempDir()); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		if err == nil && checkStatic(sh, runtime.GOARCH) == nil {
			t.Skipf("%s is static here", sh)
		}
		t.Errorf("a dynamically linked tool: %v", err)
	}
	write(filepath.Join(tools, "etcd"), exe, 0o755)
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	d.Arch = other
	if _, err := BuildDemo(o, d, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not linux/"+other) {
		t.Errorf("a tool of another architecture: %v", err)
	}
}
