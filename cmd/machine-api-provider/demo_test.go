package main

import (
	"bytes"
	"strings"
	"testing"
)

// A cloud the demo cannot emulate is refused before anything starts, with
// the clouds it can.
func TestDemoRefusesUnknownCloud(t *testing.T) {
	cmd := demoCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	dir := t.TempDir()
	cmd.SetArgs([]string{"--cloud", "aws", "--dir", dir, "--bin-dir", dir})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `"aws"`) || !strings.Contains(err.Error(), "cloudscale or exoscale") {
		t.Fatalf("err = %v; want one naming aws and the clouds there are", err)
	}
	if strings.Contains(out.String(), "==> starting") {
		t.Errorf("the demo started for an unknown cloud:\n%s", out.String())
	}
}
