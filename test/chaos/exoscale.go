package chaos

import (
	"context"

	"github.com/appuio/machine-api-provider/api/exoscale/v1beta1"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// exoscaleCloud is the Exoscale emulator.
type exoscaleCloud struct {
	emu     *emuexo.Emulator
	url     string
	creates *creates
}

func (c *exoscaleCloud) Name() string { return "exoscale" }

func (c *exoscaleCloud) Start(ctx context.Context, _ string, seed int64, faults []harness.Rule) error {
	// The default account's instance quota (20, as on a new Exoscale
	// account) would refuse `make chaos-long`'s 50 Machines: raised, as
	// Exoscale does on request.
	acc := emuexo.DefaultAccount
	acc.Quotas = map[string]int64{"instance": -1}
	emu, err := emuexo.New(emuexo.Config{
		Seed: seed, Faults: faults, BootTime: emulatorBootTime, Accounts: []emuexo.Account{acc},
		// Operations the client must follow, as on the real cloud.
		OperationTime: emuexo.DefaultOperationTime,
	})
	if err != nil {
		return err
	}
	c.emu = emu
	c.url, c.creates, err = serveTracked(ctx, c.CreateRoute(), emu)
	return err
}

func (c *exoscaleCloud) Harness() *harness.Harness { return c.emu.Harness() }

func (c *exoscaleCloud) ManagerArgs() []string {
	return []string{"--cloud", "exoscale", "--exoscale-api-endpoint", c.url + "v2"}
}

func (c *exoscaleCloud) ManagerEnv() []string {
	return []string{"EXOSCALE_API_KEY=" + emuexo.DefaultAPIKey, "EXOSCALE_API_SECRET=" + emuexo.DefaultAPISecret}
}

func (c *exoscaleCloud) ProviderSpec() string {
	return `{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.medium","template":{"name":"rhcos-4.19","visibility":"private"},"diskSize":50,"antiAffinityKey":"` + AntiAffinityKey + `"}`
}

func (c *exoscaleCloud) CreateRoute() string { return "POST /v2/instance" }

func (c *exoscaleCloud) Inventory() (Inventory, error) {
	var inv Inventory
	for _, i := range c.emu.Instances() {
		inv.Servers = append(inv.Servers, Server{ID: i.ID, Name: i.Name, Machine: i.Labels[v1beta1.LabelMachineName], ClusterID: i.Labels[v1beta1.LabelClusterID]})
	}
	for _, g := range c.emu.AntiAffinityGroups() {
		inv.Groups = append(inv.Groups, Group{ID: g.ID, Name: g.Name, Members: g.Members})
	}
	inv.sort()
	return inv, nil
}

func (c *exoscaleCloud) CreatesInFlight() []string { return c.creates.names() }
