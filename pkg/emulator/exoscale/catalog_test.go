package exoscale_test

import (
	"slices"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func TestInstanceTypes(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	l, err := v.client.ListInstanceTypes(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]v3.InstanceType{}
	for _, it := range l.InstanceTypes {
		byName[string(it.Family)+"."+string(it.Size)] = it
	}
	for name, want := range map[string]struct{ cpus, memGiB, gpus int64 }{
		"standard.micro":       {1, 0, 0},
		"standard.medium":      {2, 4, 0},
		"standard.extra-large": {4, 16, 0},
		"standard.titan":       {16, 128, 0},
		"cpu.huge":             {16, 32, 0},
		"memory.mega":          {8, 64, 0},
		"gpu2.large":           {24, 120, 3},
		"gpu3.huge":            {96, 448, 8},
	} {
		it, found := byName[name]
		if !found {
			t.Errorf("no %s", name)
			continue
		}
		if it.Cpus != want.cpus || (want.memGiB > 0 && it.Memory != want.memGiB<<30) || it.Gpus != want.gpus {
			t.Errorf("%s: %d CPUs, %d bytes, %d GPUs; want %d, %d GiB, %d", name, it.Cpus, it.Memory, it.Gpus, want.cpus, want.memGiB, want.gpus)
		}
		if it.Authorized == nil || !*it.Authorized {
			t.Errorf("%s is not authorized for the default account", name)
		}
	}
	if m := byName["standard.micro"].Memory; m != 512<<20 {
		t.Errorf("standard.micro has %d bytes, want 512 MiB", m)
	}
	// The SDK's own lookup by family.size finds the same.
	medium, err := l.FindInstanceTypeByIdOrFamilyAndSize("standard.medium")
	if err != nil || medium.ID != typeMedium {
		t.Fatalf("FindInstanceTypeByIdOrFamilyAndSize: %v, %v", medium.ID, err)
	}
	got, err := v.client.GetInstanceType(v.ctx, typeMedium)
	if err != nil || got.Cpus != 2 || !slices.Contains(got.Zones, "hr-zag-1") {
		t.Fatalf("GetInstanceType: %+v, %v", got, err)
	}
	gpu, err := v.client.GetInstanceType(v.ctx, v3.UUID(emu.InstanceTypeID("gpu3.small")))
	if err != nil || slices.Contains(gpu.Zones, "ch-gva-2") {
		t.Fatalf("gpu3.small zones %v, %v", gpu.Zones, err)
	}
	_, err = v.client.GetInstanceType(v.ctx, "6f8e2c7a-1234-4abc-8def-0123456789ab")
	apiError(t, err, v3.ErrNotFound)

	// An account without a GPU quota sees GPU types unauthorized.
	w := newEnv(t, emu.Config{Accounts: []emu.Account{{Name: "nogpu", Key: "k", Secret: "s", Quotas: map[string]int64{"gpu": 0}}}})
	gpu, err = w.client.GetInstanceType(w.ctx, v3.UUID(emu.InstanceTypeID("gpu3.small")))
	if err != nil || gpu.Authorized == nil || *gpu.Authorized {
		t.Fatalf("gpu3.small for an account without GPU quota: authorized %v, %v", gpu.Authorized, err)
	}
}
