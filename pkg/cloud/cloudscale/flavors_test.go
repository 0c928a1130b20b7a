package cloudscale

import (
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

func TestFlavor(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	f, err := v.client.Flavor(v.ctx, "rma1", "flex-16-4")
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "flex-16-4" || f.VCPUs != 4 || f.MemoryMiB != 16384 || f.GPUs != 0 || f.GPUType != "" || f.Arch != "amd64" {
		t.Errorf("flex-16-4 = %+v", f)
	}
	g, err := v.client.Flavor(v.ctx, "rma1", "gpu2-128-16-1-200")
	if err != nil {
		t.Fatal(err)
	}
	if g.GPUs != 1 || g.GPUType == "" || g.VCPUs != 16 || g.MemoryMiB != 128*1024 {
		t.Errorf("gpu2-128-16-1-200 = %+v", g)
	}
	for _, tc := range []struct{ zone, name string }{{"rma1", "flex-99-1"}, {"lpg1", "gpu2-128-16-1-200"}} {
		_, err := v.client.Flavor(v.ctx, tc.zone, tc.name)
		if ic := asInvalid(t, err); ic.Field != "flavor" {
			t.Errorf("%s in %s: field %q", tc.name, tc.zone, ic.Field)
		}
	}
	if n := v.emu.Harness().Count("GET /v1/flavors"); n != 1 {
		t.Errorf("%d flavor lists for four lookups, want 1", n)
	}
}

func TestFlavorCacheExpires(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	now := time.Now()
	v.client.now = func() time.Time { return now }
	lookup := func() {
		t.Helper()
		if _, err := v.client.Flavor(v.ctx, "rma1", "flex-4-1"); err != nil {
			t.Fatal(err)
		}
	}
	lookup()
	now = now.Add(9 * time.Minute)
	lookup()
	if n := v.emu.Harness().Count("GET /v1/flavors"); n != 1 {
		t.Fatalf("%d flavor lists within 10 minutes, want 1", n)
	}
	now = now.Add(2 * time.Minute)
	lookup()
	if n := v.emu.Harness().Count("GET /v1/flavors"); n != 2 {
		t.Fatalf("%d flavor lists after 11 minutes, want 2", n)
	}

	// A failed refresh falls back to the list known.
	if err := v.emu.Harness().AddRule(harness.Rule{Route: "GET /v1/flavors", ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(11 * time.Minute)
	lookup()
	if n, want := v.emu.Harness().Count("GET /v1/flavors"), int64(2+cloud.ReadAttempts); n != want {
		t.Fatalf("%d flavor lists, want %d: the failed refresh counted, with its retries", n, want)
	}
}

func TestFlavorListUnavailable(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	if err := v.emu.Harness().AddRule(harness.Rule{Route: "GET /v1/flavors", ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := v.client.Flavor(v.ctx, "rma1", "flex-4-1")
	asRetryable(t, err)
}
