package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallManifestsAsksForTheNetwork: a cloudscale.ch MachineSet gets
// the cluster's private network, and a public interface only when asked
// for; without --network nothing is written. Exoscale needs a security
// group.
func TestInstallManifestsAsksForTheNetwork(t *testing.T) {
	run := func(args ...string) (string, error) {
		dir := t.TempDir()
		cmd := installManifestsCommand()
		cmd.SetArgs(append([]string{"--dir", dir, "--cluster-id", "c1-x7k2p", "--image", "registry.example.com/machine-api-provider:v0.1.0",
			"--zone", "rma1", "--instance-type", "plus-16-4", "--os-image", "custom:rhcos-4.19", "--no-credentials"}, args...))
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			return "", err
		}
		matches, _ := filepath.Glob(filepath.Join(dir, "openshift", "*_machineset_c1-x7k2p-worker-rma1.yaml"))
		if len(matches) != 1 {
			t.Fatalf("the worker MachineSet: %v", matches)
		}
		b, err := os.ReadFile(matches[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(b), nil
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "--network is required") {
		t.Errorf("without --network: %v, want it required", err)
	}
	const uuid = "2db69ba3-1864-4608-853a-0771b6885a3a"
	ms, err := run("--network", uuid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ms, "networkUUID: "+uuid) || strings.Contains(ms, "Public") {
		t.Errorf("with --network: want the private interface only:\n%s", ms)
	}
	if ms, err = run("--network", uuid, "--public-interface"); err != nil || !strings.Contains(ms, "type: Public") {
		t.Errorf("with --public-interface: %v\n%s", err, ms)
	}
	if _, err := run("--cloud", "exoscale", "--zone", "ch-gva-2"); err == nil || !strings.Contains(err.Error(), "--security-group is required") {
		t.Errorf("Exoscale without --security-group: %v, want it required", err)
	}
}
