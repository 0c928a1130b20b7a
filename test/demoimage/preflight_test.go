package demoimage_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeCommands writes shell scripts named as commands into a directory to
// put first on the PATH.
func fakeCommands(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMakeDemoRefusesWithinASecond: where the local control plane cannot
// run — another system than Linux, or Linux for a user who may not have a
// user namespace — `make demo` stops at its first step, before it builds a
// single tool (bin/ stays empty), saying why and what to do instead; with
// Docker or Podman answering on another system it goes for the container.
// (It once built tools for 15 minutes on macOS before the binary refused.)
// uname, id, unshare, docker and podman are played by scripts.
func TestMakeDemoRefusesWithinASecond(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	engineIdle := map[string]string{"docker": "exit 1", "podman": "exit 1"}
	with := func(m map[string]string, more map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	for _, c := range []struct {
		name   string
		fakes  map[string]string
		make   bool // make demo, else the script alone
		code   int
		stderr []string
	}{
		{"macOS-no-engine", with(engineIdle, map[string]string{"uname": "echo Darwin"}), true, 2,
			[]string{"runs on Linux only", "this is Darwin", "start docker's daemon", "make demo-container"}},
		{"macOS-docker", with(engineIdle, map[string]string{"uname": "echo Darwin", "docker": "exit 0"}), false, 2,
			[]string{"Running it in a container with docker"}},
		{"linux-no-userns", with(engineIdle, map[string]string{"uname": "echo Linux", "id": "echo 1000",
			"unshare": "echo 'unshare: write failed /proc/self/uid_map: Operation not permitted' >&2; exit 1"}), true, 2,
			[]string{"takes root or an unprivileged user namespace", "Operation not permitted", "as root", "make demo-container"}},
		{"linux-userns", with(engineIdle, map[string]string{"uname": "echo Linux", "id": "echo 1000", "unshare": "exit 0"}), false, 0, nil},
		{"linux-root", with(engineIdle, map[string]string{"uname": "echo Linux", "id": "echo 0"}), false, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := fakeCommands(t, c.fakes) + string(os.PathListSeparator) + os.Getenv("PATH")
			bin := t.TempDir()
			var cmd *exec.Cmd
			if c.make {
				cmd = exec.Command("make", "--no-print-directory", "demo", "BIN_DIR="+bin)
			} else {
				cmd = exec.Command(filepath.Join(root, "hack", "demo-preflight.sh"))
			}
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "PATH="+path)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			t.Logf("exit %d after %s:\n%s", code, took.Round(time.Millisecond), stderr.String())
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for _, want := range c.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q", want)
				}
			}
			if built, _ := os.ReadDir(bin); len(built) > 0 {
				t.Errorf("a tool was built before the refusal: %v", built)
			}
		})
	}
}
