package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// benchCloud is what the benchmark needs to know of one cloud: how to stand
// up its emulator, which request makes a server (the one the added latency
// slows down), a provider spec, and how the manager reaches the emulator.
type benchCloud struct {
	name string
	// options stand the emulator up with room for every server.
	options func() fixture.Options
	// createRoute is the request that makes a server, as the harness
	// counts it.
	createRoute string
	// sweepRoute is the list of anti-affinity groups that the janitor's
	// sweep makes every interval.
	sweepRoute string
	// zoneSweep is how many lists a sweep of every zone adds to a
	// cluster's list every fullSweepEvery: Exoscale lists each zone's
	// instances on their own, and a cluster's lists cover every zone
	// that often (pkg/cloud/exoscale, zones.go), the zones no Machine
	// uses too.
	zoneSweep int
	spec      string
	// managerArgs and managerEnv point the manager process at the API at
	// url (the emulator's, or a proxy's) with the default account's
	// credentials.
	managerArgs func(url string) []string
	managerEnv  []string
	// servers counts the servers the emulator holds.
	servers func(e *fixture.Env) int
}

// fullSweepEvery is how often a cluster's lists cover every zone
// (pkg/cloud/exoscale, zones.go).
const fullSweepEvery = 10 * time.Minute

// bootTime keeps servers "starting" for a while, as on a real cloud.
const bootTime = 2 * time.Second

var clouds = map[string]benchCloud{
	fixture.Cloudscale: {
		name: fixture.Cloudscale,
		options: func() fixture.Options {
			// No write audit: its cost grows with the account, and the
			// bench measures the provider (harness.Options.NoWriteAudit).
			return fixture.Options{Cloud: fixture.Cloudscale, Emulator: emucs.Config{BootTime: bootTime, NoWriteAudit: true}}
		},
		createRoute: "POST /v1/servers",
		sweepRoute:  "GET /v1/server-groups",
		spec:        `{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"flex-16-4","image":"custom:rhcos-4.19","rootVolumeSizeGB":50,"interfaces":[{"type":"Public"}]}`,
		managerArgs: func(url string) []string {
			return []string{"--cloud", "cloudscale", "--cloudscale-api-url", url}
		},
		managerEnv: []string{"CLOUDSCALE_API_TOKEN=bench-token"},
		servers:    func(e *fixture.Env) int { return len(e.Emulator.Servers()) },
	},
	fixture.Exoscale: {
		name: fixture.Exoscale,
		options: func() fixture.Options {
			acc := emuexo.DefaultAccount
			// The default quota (20 instances) would stop the bench.
			acc.Quotas = map[string]int64{"instance": -1}
			// Deleted instances go at once, as cloudscale.ch's do: the
			// time to zero servers is the provider's, not the
			// emulator's "destroying" state (which takes the boot
			// time unless told otherwise). No write audit, as above.
			return fixture.Options{Cloud: fixture.Exoscale, ExoscaleEmulator: emuexo.Config{
				Accounts: []emuexo.Account{acc}, BootTime: bootTime, ActionTime: time.Millisecond, NoWriteAudit: true,
			}}
		},
		createRoute: "POST /v2/instance",
		sweepRoute:  "GET /v2/anti-affinity-group",
		zoneSweep:   len(emuexo.Zones) - 1,
		spec:        `{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":"ch-gva-2","instanceType":"standard.large","template":{"name":"rhcos-4.19"},"diskSize":120}`,
		managerArgs: func(url string) []string {
			return []string{"--cloud", "exoscale", "--exoscale-api-endpoint", url + "v2"}
		},
		managerEnv: []string{"EXOSCALE_API_KEY=" + emuexo.DefaultAPIKey, "EXOSCALE_API_SECRET=" + emuexo.DefaultAPISecret},
		servers:    func(e *fixture.Env) int { return e.Exoscale.CountInstances() },
	},
}

// eachCloud runs fn as a sub-benchmark of every cloud CLOUD names.
func eachCloud(b *testing.B, fn func(b *testing.B, c benchCloud)) {
	for _, name := range strings.Split(env("CLOUD", fixture.Cloudscale), ",") {
		c, err := cloudNamed(strings.TrimSpace(name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) { fn(b, c) })
	}
}

func cloudNamed(name string) (benchCloud, error) {
	c, ok := clouds[name]
	if !ok {
		return benchCloud{}, fmt.Errorf("CLOUD: no cloud %q (%s, %s)", name, fixture.Cloudscale, fixture.Exoscale)
	}
	return c, nil
}
