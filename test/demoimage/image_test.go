// Package demoimage tests `make demo` where the local control plane cannot
// run by itself: the Makefile's refusal within a second, before any tool
// is built (preflight_test.go), and the demo's container image, run as a
// container engine runs it (`docker run --privileged`), without one.
package demoimage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// shimEnv makes the test binary, started in a new mount and PID namespace,
// play the container runtime's last step: mount /proc, /dev, /etc/hosts,
// /etc/resolv.conf and /etc/hostname into the image's unpacked root, chroot
// there and exec the entrypoint as PID 1.
const shimEnv = "DEMOIMAGE_SHIM_ROOT"

func init() {
	if root := os.Getenv(shimEnv); root != "" {
		err := shim(root, os.Getenv("DEMOIMAGE_SHIM_DIR"), os.Args[1:])
		fmt.Fprintln(os.Stderr, "shim:", err)
		os.Exit(127)
	}
}

// shim runs in the new namespaces; it returns only on failure.
func shim(root, workdir string, argv []string) error {
	// Nothing mounted here reaches this machine's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	for _, m := range []struct {
		target, fstype, source string
		flags                  uintptr
	}{
		{"proc", "proc", "proc", 0},
		{"dev", "", "/dev", unix.MS_BIND | unix.MS_REC},
	} {
		target := filepath.Join(root, m.target)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.source, target, m.fstype, m.flags, ""); err != nil {
			return fmt.Errorf("mounting %s: %w", target, err)
		}
	}
	// What every container runtime gives a container besides the image:
	// /etc/hosts (localhost), /etc/resolv.conf (this machine's) and
	// /etc/hostname, bind-mounted over the image's.
	resolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		resolv = nil
	}
	for name, data := range map[string][]byte{
		"hosts":       []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"),
		"resolv.conf": resolv,
		"hostname":    []byte("demo\n"),
	} {
		src := filepath.Join(filepath.Dir(root), "runtime-"+name)
		target := filepath.Join(root, "etc", name)
		if err := os.WriteFile(src, data, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			return err
		}
		if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mounting %s: %w", target, err)
		}
	}
	if err := unix.Chroot(root); err != nil {
		return err
	}
	if err := os.Chdir(workdir); err != nil {
		return err
	}
	var env []string
	if err := json.Unmarshal([]byte(os.Getenv("DEMOIMAGE_SHIM_ENV")), &env); err != nil {
		return err
	}
	return syscall.Exec(argv[0], argv, env)
}

// imageConfig is the part of an OCI image config a runtime acts on.
type imageConfig struct {
	Architecture, OS string
	Config           struct {
		User       string
		Entrypoint []string
		Cmd        []string
		Env        []string
		WorkingDir string
	}
}

// unpack writes the layers of the one image of an OCI layout tarball into
// root, in order (whiteouts honoured), and returns its config.
func unpack(t *testing.T, archive, root string) imageConfig {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatalf("%v (make demo-image builds it)", err)
	}
	defer f.Close()
	blobs := map[string]string{} // digest -> path in a scratch directory
	scratch := t.TempDir()
	tr := tar.NewReader(f)
	var index []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.Name == "index.json":
			index, err = io.ReadAll(tr)
		case strings.HasPrefix(h.Name, "blobs/sha256/") && h.Typeflag == tar.TypeReg:
			p := filepath.Join(scratch, filepath.Base(h.Name))
			err = writeFile(p, tr, 0o644)
			blobs["sha256:"+filepath.Base(h.Name)] = p
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	read := func(digest string) []byte {
		b, err := os.ReadFile(blobs[digest])
		if err != nil {
			t.Fatalf("blob %s: %v", digest, err)
		}
		return b
	}
	type descriptor struct{ Digest string }
	var idx struct{ Manifests []descriptor }
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(idx.Manifests))
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(read(idx.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(read(manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, l := range manifest.Layers {
		lf, err := os.Open(blobs[l.Digest])
		if err != nil {
			t.Fatal(err)
		}
		if err := extractLayer(lf, root); err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		lf.Close()
	}
	return cfg
}

func extractLayer(r io.Reader, root string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		name := filepath.Clean("/" + h.Name)
		p := filepath.Join(root, name)
		if base := filepath.Base(name); strings.HasPrefix(base, ".wh.") {
			if err := os.RemoveAll(filepath.Join(filepath.Dir(p), strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		mode := os.FileMode(h.Mode) & os.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			perm := mode
			if h.Mode&0o1000 != 0 {
				perm |= os.ModeSticky // /tmp
			}
			err = os.Chmod(p, perm)
		case tar.TypeReg:
			err = writeFile(p, tr, mode)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		default:
			err = fmt.Errorf("%s: entry type %c", h.Name, h.Typeflag)
		}
		if err == nil && h.Uid != 0 {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestDemoImageRunsTheDemo (make e2e, after make demo-image): the demo's
// container image, run as `docker run --rm --privileged <image>` runs it —
// its layers unpacked into a root of their own, its entrypoint and command
// started as PID 1 of a new PID and mount namespace with /proc and /dev,
// chrooted there, as root, with exactly the image's environment and
// working directory, in this machine's network (docker's --network host;
// the pods get networks of their own either way) — takes the autoscaling
// loop from zero to workers and back to zero with nothing but what the
// image holds: no Go, no repository, no bin/.
func TestDemoImageRunsTheDemo(t *testing.T) {
	if os.Getenv("E2E") == "" {
		t.Skip("make e2e runs it, after make demo-image")
	}
	if os.Geteuid() != 0 {
		t.Skip("runs the image as root, in namespaces of its own, as docker run --privileged does")
	}
	archive, err := filepath.Abs(filepath.Join("..", "..", "_output", "machine-api-provider-demo.oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "rootfs") // beside it: what the runtime mounts in
	start := time.Now()
	cfg := unpack(t, archive, root)
	t.Logf("unpacked %s in %s", archive, time.Since(start).Round(100*time.Millisecond))
	c := cfg.Config
	if cfg.OS != "linux" || (c.User != "0:0" && c.User != "root" && c.User != "0") || len(c.Entrypoint) == 0 {
		t.Fatalf("the image's config: %s/%s, user %q, entrypoint %v", cfg.OS, cfg.Architecture, c.User, c.Entrypoint)
	}
	if !slices.Contains(c.Cmd, "--keep=false") {
		t.Errorf("the image's command %v: want the demo to end at zero (--keep=false): nothing outside the container reaches its cluster", c.Cmd)
	}
	argv := append(slices.Clone(c.Entrypoint), c.Cmd...)
	env := slices.Clone(c.Env)
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "HOME=") }) {
		env = append(env, "HOME=/root") // docker's for root
	}
	workdir := c.WorkingDir
	if workdir == "" {
		workdir = "/"
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, argv...)
	envJSON, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = []string{shimEnv + "=" + root, "DEMOIMAGE_SHIM_DIR=" + workdir, "DEMOIMAGE_SHIM_ENV=" + string(envJSON)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start = time.Now()
	err = cmd.Run()
	took := time.Since(start)
	t.Logf("the demo in the image took %s:\n%s", took.Round(time.Second), out.String())
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(root, "tmp", "machine-api-provider-demo-*", "demo.log"))
		for _, l := range logs {
			if b, err := os.ReadFile(l); err == nil {
				t.Logf("%s (its end):\n%s", l, tail(string(b), 60))
			}
		}
		t.Fatalf("the image's entrypoint %v: %v", argv, err)
	}
	for _, want := range []string{"scale-up done", "down to zero: no Machine, Node or server left"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
