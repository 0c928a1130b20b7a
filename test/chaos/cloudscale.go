package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// cloudscaleCloud is the cloudscale.ch emulator.
type cloudscaleCloud struct {
	emu       *emucs.Emulator
	url       string
	creates   *creates
	stateFile string
}

func (c *cloudscaleCloud) Name() string { return "cloudscale" }

func (c *cloudscaleCloud) Start(ctx context.Context, dir string, seed int64, faults []harness.Rule) error {
	// The emulator has no in-process view of its server groups; its state
	// file, rewritten atomically under the world's lock after every change,
	// is one consistent snapshot of servers and groups.
	c.stateFile = filepath.Join(dir, "cloudscale-state.json")
	emu, err := emucs.New(emucs.Config{Seed: seed, Faults: faults, BootTime: emulatorBootTime, StateFile: c.stateFile})
	if err != nil {
		return err
	}
	c.emu = emu
	c.url, c.creates, err = serveTracked(ctx, c.CreateRoute(), emu)
	return err
}

func (c *cloudscaleCloud) Harness() *harness.Harness { return c.emu.Harness() }

func (c *cloudscaleCloud) ManagerArgs() []string {
	return []string{"--cloud", "cloudscale", "--cloudscale-api-url", c.url}
}

func (c *cloudscaleCloud) ManagerEnv() []string { return []string{"CLOUDSCALE_API_TOKEN=chaos-token"} }

func (c *cloudscaleCloud) ProviderSpec() string {
	return `{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"flex-4-2","image":"custom:rhcos-4.19","rootVolumeSizeGB":50,"interfaces":[{"type":"Public"}],"antiAffinityKey":"` + AntiAffinityKey + `"}`
}

func (c *cloudscaleCloud) CreateRoute() string { return "POST /v1/servers" }

// cloudscaleState is the part of the emulator's state file the checks read.
type cloudscaleState struct {
	Servers map[string]struct {
		UUID         string            `json:"uuid"`
		Name         string            `json:"name"`
		Tags         map[string]string `json:"tags"`
		ServerGroups []string          `json:"server_groups"`
	} `json:"servers"`
	ServerGroups map[string]struct {
		UUID string `json:"uuid"`
		Name string `json:"name"`
	} `json:"server_groups"`
}

func (c *cloudscaleCloud) Inventory() (Inventory, error) {
	b, err := os.ReadFile(c.stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return Inventory{}, nil // nothing was written yet
	}
	if err != nil {
		return Inventory{}, err
	}
	var st cloudscaleState
	if err := json.Unmarshal(b, &st); err != nil {
		return Inventory{}, fmt.Errorf("reading the emulator's state file: %w", err)
	}
	var inv Inventory
	members := map[string][]string{}
	for _, s := range st.Servers {
		inv.Servers = append(inv.Servers, Server{ID: s.UUID, Name: s.Name, Machine: s.Tags[v1beta1.TagMachineName], ClusterID: s.Tags[v1beta1.TagClusterID]})
		for _, g := range s.ServerGroups {
			members[g] = append(members[g], s.UUID)
		}
	}
	for _, g := range st.ServerGroups {
		inv.Groups = append(inv.Groups, Group{ID: g.UUID, Name: g.Name, Members: members[g.UUID]})
	}
	inv.sort()
	return inv, nil
}

func (c *cloudscaleCloud) CreatesInFlight() []string { return c.creates.names() }
