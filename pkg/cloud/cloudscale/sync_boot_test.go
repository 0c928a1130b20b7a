package cloudscale

import (
	"maps"
	"sync"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// While a server this process created boots, syncing it costs no call: its
// root volume is tagged once it runs, with one call, so that the calls of
// a burst of creates go to the creates.
func TestRootVolumeIsTaggedOnceTheServerRuns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	v := newEnv(t, emucs.Config{BootTime: time.Minute, Clock: clock})
	spec := v.spec(func(p *v1beta1.CloudscaleMachineProviderSpec) {
		p.RootVolumeTags = map[string]string{"backup": "daily"}
	})
	s := v.create("m", spec)
	if s.Running {
		t.Fatalf("server %s runs at once; the test wants it booting", s.ID)
	}
	root := s.Detail.(*sdk.Server).Volumes[0].UUID
	for range 2 {
		if n, r := v.calls(func() {
			if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, s); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("sync of a booting server made %v, want no call", r)
		}
	}

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	running, err := v.client.GetServer(v.ctx, s.ID)
	if err != nil || !running.Running {
		t.Fatalf("server after its boot time: %+v, %v", running, err)
	}
	if _, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, running); err != nil {
			t.Fatal(err)
		}
	}); !maps.Equal(r, map[string]int64{"PATCH /v1/volumes/{uuid}": 1}) {
		t.Errorf("first sync of the running server made %v, want one volume PATCH (no read: this process made it)", r)
	}
	want := map[string]string{"backup": "daily", v1beta1.TagMachineName: "m", v1beta1.TagClusterID: testCluster}
	if got := v.volume(root).Tags; !maps.Equal(got, want) {
		t.Errorf("root volume tags %v, want %v", got, want)
	}
	if n, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, running); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("the next sync made %v, want no call", r)
	}
}

// Nor is it tagged while the account's calls are needed elsewhere: tagging
// waits until half of the burst is unused again.
func TestRootVolumeTaggingLeavesTheRateLimitToCreates(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	cl, err := v.cloud.NewClient(cloud.Credentials{Values: map[string]string{TokenKey: testToken}, Source: "the test's token"},
		cloud.NewGate(Name, cloud.RateLimit{QPS: 0.001, Burst: 4}))
	if err != nil {
		t.Fatal(err)
	}
	v.client = cl.(*Client)
	spec := v.spec(nil)
	// The flavor list, the look for the Machine's servers and the create
	// leave one call of the burst of four.
	s := v.create("m", spec)
	if !s.Running {
		t.Fatalf("server %s is not running; the test wants it to", s.ID)
	}
	if n, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, s); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("sync with one call of the burst left made %v, want none", r)
	}
	if !v.client.isUntagged(s.ID) {
		t.Error("the root volume is no longer waiting for its tags")
	}
}

// A failed tagging does not fail the sync, which would hold the Machine
// back: the next sync tags the volume.
func TestFailedRootVolumeTaggingWaitsForTheNextSync(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emucs.Config{})
	if err := v.emu.Harness().AddRule(harness.Rule{Route: "PATCH /v1/volumes/{uuid}", ErrorRate: 1, ErrorStatus: 503, Times: 1}); err != nil {
		t.Fatal(err)
	}
	spec := v.spec(nil)
	s := v.create("m", spec)
	root := s.Detail.(*sdk.Server).Volumes[0].UUID
	for i, want := range []int64{1, 1} {
		if _, r := v.calls(func() {
			if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, s); err != nil {
				t.Errorf("sync %d: %v", i+1, err)
			}
		}); r["PATCH /v1/volumes/{uuid}"] != want {
			t.Errorf("sync %d made %v, want %d volume PATCH", i+1, r, want)
		}
	}
	if got := v.volume(root).Tags[v1beta1.TagMachineName]; got != "m" {
		t.Errorf("root volume tags %v after the second sync", v.volume(root).Tags)
	}
	if n, r := v.calls(func() {
		if _, err := v.client.SyncServer(v.ctx, ref("m"), spec, s); err != nil {
			t.Error(err)
		}
	}); n != 0 {
		t.Errorf("a third sync made %v", r)
	}
}
