package release_test

import (
	"debug/elf"
	"debug/macho"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// platforms are the release's command-line tools the test's release holds:
// this machine's (makeRelease; make cross builds and checks the others of
// RELEASE_PLATFORMS).
var platforms = []struct{ os, arch string }{{runtime.GOOS, runtime.GOARCH}}

// TestReleaseBinaries: the release holds the command-line tool for each
// platform, each an executable of that platform, the Linux ones static (no
// interpreter: they run on any distribution), and the one of this machine
// says the release's version.
func TestReleaseBinaries(t *testing.T) {
	r := makeRelease(t)
	for _, p := range platforms {
		path := filepath.Join(r.dir, "machine-api-provider-"+p.os+"-"+p.arch)
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s/%s: %v", p.os, p.arch, err)
			continue
		}
		if st.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable: %v", path, st.Mode())
		}
		switch p.os {
		case "linux":
			f, err := elf.Open(path)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.arch]
			if f.Machine != want {
				t.Errorf("%s: machine %v, want %v", path, f.Machine, want)
			}
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP {
					t.Errorf("%s is dynamically linked", path)
				}
			}
			f.Close()
		case "darwin":
			f, err := macho.Open(path)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			if f.Cpu != macho.CpuArm64 {
				t.Errorf("%s: CPU %v, want arm64", path, f.Cpu)
			}
			f.Close()
		}
	}
	tool := filepath.Join(r.dir, "machine-api-provider-"+runtime.GOOS+"-"+runtime.GOARCH)
	out, err := exec.Command(tool, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), Version) {
		t.Errorf("--version: %q, %v; want %s", out, err, Version)
	}
	// install-manifests installs the image of its own release, whose
	// config/ it embeds: a tool of another release would drift silently.
	out, err = exec.Command(tool, "install-manifests", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `(default "`+r.image()+`")`) {
		t.Errorf("install-manifests --help does not default --image to the release's %s (%v):\n%s", r.image(), err, out)
	}
}

// unpack is a release as an admin gets it: its files downloaded into an
// empty directory, checked against SHA256SUMS with the command the notes
// give, and the tool of this machine installed as machine-api-provider into
// a directory that is the whole PATH, with nothing else but sha256sum: no
// Go, no make, no kustomize, no repository.
func unpack(t *testing.T, r *release) (admin, tools string) {
	t.Helper()
	admin, tools = t.TempDir(), t.TempDir()
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue // the OLM bundles' trees; their images are files
		}
		if err := copyFile(filepath.Join(r.dir, e.Name()), filepath.Join(admin, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := exec.LookPath("sha256sum")
	if err != nil {
		t.Skip("no sha256sum on this machine")
	}
	if err := os.Symlink(sum, filepath.Join(tools, "sha256sum")); err != nil {
		t.Fatal(err)
	}
	if out, err := asAdmin(admin, tools, "sha256sum", "--ignore-missing", "-c", "SHA256SUMS"); err != nil {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
	if err := copyFile(filepath.Join(admin, "machine-api-provider-"+runtime.GOOS+"-"+runtime.GOARCH), filepath.Join(tools, "machine-api-provider")); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"go", "make", "kustomize", "git"} {
		if _, err := os.Stat(filepath.Join(tools, absent)); err == nil {
			t.Fatalf("%s is on the admin's PATH", absent)
		}
	}
	return admin, tools
}

// asAdmin runs a command in the admin's directory with the admin's PATH (the
// tools directory alone) and HOME.
func asAdmin(dir, tools, name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(tools, name), args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + tools, "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// adminKubeconfig writes a kubeconfig of the control plane's admin.
func adminKubeconfig(t *testing.T, cfg *rest.Config, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "admin"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
