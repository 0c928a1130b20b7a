package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// probeEnv makes the test binary, started again by
// TestEveryCommandInstallsALogger, run the root command with the arguments
// in it (separated by spaces) with every command's work replaced by a probe
// that logs through controller-runtime's log.FromContext and klog, as
// controller-runtime's client and wait helpers do inside a command.
const probeEnv = "MACHINE_API_PROVIDER_LOGGER_PROBE"

const (
	probeCtrl = "probe-through-controller-runtime"
	probeKlog = "probe-through-klog"
)

func init() {
	args := os.Getenv(probeEnv)
	if args == "" {
		return
	}
	root := rootCommand()
	forEachLeaf(root, func(c *cobra.Command) {
		c.PreRunE, c.PreRun, c.Run = nil, nil, nil
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			ctrllog.FromContext(cmd.Context()).Info(probeCtrl)
			klog.Background().Info(probeKlog)
			return nil
		}
	})
	root.SetArgs(strings.Fields(args))
	if err := root.Execute(); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(2)
	}
	os.Exit(0)
}

func forEachLeaf(c *cobra.Command, f func(*cobra.Command)) {
	if !c.HasSubCommands() {
		f(c)
	}
	for _, sub := range c.Commands() {
		forEachLeaf(sub, f)
	}
}

// TestEveryCommandInstallsALogger: whatever a command logs through
// controller-runtime's log.FromContext or klog is written by the command's
// logger. switch-from-appuio set none: controller-runtime dropped its lines
// and, 30 s in, printed "log.SetLogger(...) was never called" with a
// goroutine stack into the middle of --apply's output. Each command runs in
// a process of its own (the first logger set is controller-runtime's for
// good). demo installs its own, into its log file, in its RunE.
func TestEveryCommandInstallsALogger(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	forEachLeaf(rootCommand(), func(c *cobra.Command) {
		if path := strings.TrimPrefix(c.CommandPath(), "machine-api-provider "); path != "demo" {
			paths = append(paths, path)
		}
	})
	if len(paths) < 9 {
		t.Fatalf("found only the commands %v", paths)
	}
	for _, path := range paths {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), probeEnv+"="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", path, err, out)
			continue
		}
		for _, probe := range []string{probeCtrl, probeKlog} {
			if !strings.Contains(string(out), probe) {
				t.Errorf("%s: a line logged through %s is lost (no logger installed); the output:\n%s", path, strings.TrimPrefix(probe, "probe-through-"), out)
			}
		}
	}
}
