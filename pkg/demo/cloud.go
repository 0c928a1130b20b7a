package demo

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	cssdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"

	"github.com/appuio/machine-api-provider/pkg/bootsim"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

// The clouds the environment can run on: Options.Cloud.
const (
	Cloudscale = "cloudscale"
	Exoscale   = "exoscale"
)

// Clouds are the clouds Start can stand up, the default first.
var Clouds = []string{Cloudscale, Exoscale}

// Title names a cloud in messages ("cloudscale.ch"), or says that there is
// no such cloud.
func Title(name string) (string, error) {
	switch name {
	case Cloudscale:
		return "cloudscale.ch", nil
	case Exoscale:
		return "Exoscale", nil
	}
	return "", fmt.Errorf("no cloud %q: the demo runs on %s", name, strings.Join(Clouds, " or "))
}

// emulated is all that differs between the clouds in the loop: the
// emulator, the provider's cloud pointed at it, the worker MachineSet's
// provider spec, and the boot simulation's view of the servers. The rest of
// the environment — control plane, machine-api controllers, autoscaler,
// scenario — is the same code for every cloud.
type emulated struct {
	title   string
	handler http.Handler
	harness *harness.Harness
	view    bootsim.Cloud
	// provider is the cloud the manager runs, talking to the emulator at
	// baseURL ("http://127.0.0.1:port/").
	provider func(baseURL string) cloud.Cloud
	// zoneSuffix ends the worker MachineSet's name, as an installer names
	// MachineSets after their zone.
	zoneSuffix string
	// instanceType is the MachineSet's default: 4 vCPUs and 8 GiB on both
	// clouds, so that the same workload needs the same number of workers.
	instanceType string
	// typeNoun is what the cloud calls an instance type.
	typeNoun string
	// providerSpec is the worker MachineSet's provider spec in zone.
	providerSpec func(zone, instanceType string) string
	// otherZone and otherType are OtherMachineSet's zone and instance type.
	otherZone, otherType string
	// createRoute and deleteRoute are the harness's names of the server
	// create and delete calls.
	createRoute, deleteRoute string
	// deleteServer deletes a server through the cloud's API at baseURL
	// with the unmodified SDK, as someone with the account's credentials
	// would behind the cluster's back.
	deleteServer func(ctx context.Context, baseURL, id string) error
	// zone is the worker MachineSet's; ccmKey and ccmSecret the
	// credentials the cloud-controller-manager uses (a token, or an API
	// key and secret).
	zone, ccmKey, ccmSecret string
}

func newEmulated(name string, bootTime time.Duration) (*emulated, *emucs.Emulator, *emuexo.Emulator, error) {
	title, err := Title(name)
	if err != nil {
		return nil, nil, nil, err
	}
	switch name {
	case Exoscale:
		// Room for the release's boot images, a template per image and
		// zone, beside the seeded RHCOS of every zone.
		acc := emuexo.DefaultAccount
		acc.Quotas = map[string]int64{"template": 50}
		emu, err := emuexo.New(emuexo.Config{
			Accounts: []emuexo.Account{acc},
			BootTime: bootTime,
			// Operations are followed as on the real cloud; deletes take
			// the boot time ("destroying"), as the emulator's default.
			OperationTime: emuexo.DefaultOperationTime,
		})
		if err != nil {
			return nil, nil, nil, err
		}
		return &emulated{
			title: title, handler: emu, harness: emu.Harness(), view: exoscaleView{emu},
			provider: func(baseURL string) cloud.Cloud {
				return exocloud.New(exocloud.Options{APIEndpoint: baseURL + "v2", DefaultAPIKey: emuexo.DefaultAPIKey, DefaultAPISecret: emuexo.DefaultAPISecret})
			},
			zoneSuffix: "gva2", instanceType: "standard.large", typeNoun: "instance type",
			providerSpec: func(zone, instanceType string) string {
				return fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":%q,"instanceType":%q,"template":{"name":%q},"diskSize":50,"antiAffinityKey":"worker","userDataSecret":{"name":%q}}`,
					zone, instanceType, emuexo.DefaultTemplates[0].Name, WorkerUserDataSecret)
			},
			otherZone: "ch-gva-2", otherType: emuexo.InstanceTypeID("standard.extra-large"),
			createRoute: "POST /v2/instance", deleteRoute: "DELETE /v2/instance/{id}",
			zone: "ch-gva-2", ccmKey: emuexo.DefaultAPIKey, ccmSecret: emuexo.DefaultAPISecret,
			deleteServer: func(ctx context.Context, baseURL, id string) error {
				c, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret), v3.ClientOptWithEndpoint(v3.Endpoint(baseURL+"v2")))
				if err != nil {
					return err
				}
				op, err := c.DeleteInstance(ctx, v3.UUID(id))
				if err != nil {
					return err
				}
				_, err = c.Wait(ctx, op, v3.OperationStateSuccess)
				return err
			},
		}, nil, emu, nil
	default:
		emu, err := emucs.New(emucs.Config{BootTime: bootTime})
		if err != nil {
			return nil, nil, nil, err
		}
		return &emulated{
			title: title, handler: emu, harness: emu.Harness(), view: cloudscaleView{emu},
			provider: func(baseURL string) cloud.Cloud {
				return cscloud.New(cscloud.Options{BaseURL: baseURL, DefaultToken: "demo"})
			},
			zoneSuffix: "rma1", instanceType: "flex-8-4", typeNoun: "flavor",
			providerSpec: func(zone, flavor string) string {
				return fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":%q,"flavor":%q,"image":"custom:rhcos-4.19","rootVolumeSizeGB":100,"interfaces":[{"type":"Public"}],"antiAffinityKey":"worker","userDataSecret":{"name":%q}}`, zone, flavor, WorkerUserDataSecret)
			},
			otherZone: "lpg1", otherType: "flex-16-4",
			createRoute: "POST /v1/servers", deleteRoute: "DELETE /v1/servers/{uuid}",
			zone: "rma1", ccmKey: "ccm",
			deleteServer: func(ctx context.Context, baseURL, id string) error {
				c := cssdk.NewClient(nil)
				c.BaseURL, _ = url.Parse(baseURL)
				c.AuthToken = "someone-else"
				return c.Servers.Delete(ctx, id)
			},
		}, emu, nil, nil
	}
}

// cloudscaleView shows the boot simulation the cloudscale.ch emulator's
// servers. A server whose user data sets no hostname gets none from the
// cloud that anything shows: cloudscale.ch's RHCOS image is the openstack
// one, on which afterburn sets no hostname (coreos/afterburn,
// dracut/30afterburn/afterburn-hostname.service runs on aliyun, azure,
// digitalocean, exoscale and vultr only), and the machine-config-operator
// fetches it from OpenStack's metadata only on platform OpenStack
// (templates/common/openstack/units/afterburn-hostname.service.yaml), not
// on None or External. What DHCP or reverse DNS might give on its private
// networks is not known: the simulation gives bootsim.DefaultHostname,
// which is not the Machine's name, so that a test fails where nothing but
// the cloud would name the Node (docs/cloudscale.md).
type cloudscaleView struct{ emu *emucs.Emulator }

func (v cloudscaleView) Servers() []bootsim.Server {
	var out []bootsim.Server
	for _, s := range v.emu.Servers() {
		out = append(out, bootsim.Server{
			ID: s.UUID, ProviderID: cscloud.Name + "://" + s.UUID, Name: s.Name, UserData: []byte(s.UserData),
			Running:      s.Status == "running",
			InstanceType: s.Flavor, Zone: s.Zone, Region: strings.TrimRight(s.Zone, "0123456789"),
			CPUs: s.VCPUs, GPUs: s.GPUs, MemoryBytes: int64(s.MemoryGB) << 30, DiskGiB: s.RootVolumeGB,
			PrivateIPs: s.PrivateIPs, PublicIPs: s.PublicIPs,
		})
	}
	return out
}

// exoscaleView shows the boot simulation the Exoscale emulator's
// instances. Exoscale has no regions above its zones; its cloud controller
// manager labels Nodes with the zone as the region, and so does this. An
// instance whose user data sets no hostname is named by the cloud: RHCOS
// on Exoscale (ignition.platform.id=exoscale) runs afterburn-hostname in
// its initramfs, which writes /etc/hostname from the metadata's
// local-hostname, the instance's name, before Ignition writes its files
// (coreos/afterburn, dracut/30afterburn/afterburn-hostname.service and
// src/providers/exoscale; appuio/terraform-openshift4-exoscale overrides it
// only because its instances are named <host>.<domain>).
type exoscaleView struct{ emu *emuexo.Emulator }

func (v exoscaleView) Servers() []bootsim.Server {
	var out []bootsim.Server
	for _, i := range v.emu.Instances() {
		out = append(out, bootsim.Server{
			ID: i.ID, ProviderID: exocloud.Name + "://" + i.ID, Name: i.Name, CloudHostname: i.Name,
			Running:      i.State == "running",
			InstanceType: i.InstanceType, Zone: i.Zone, Region: i.Zone,
			CPUs: int(i.CPUs), GPUs: int(i.GPUs), MemoryBytes: i.MemoryBytes, DiskGiB: int(i.DiskSizeGiB),
			PrivateIPs: slices.Clone(i.PrivateIPs),
			PublicIPs:  slices.DeleteFunc([]string{i.PublicIPv4, i.PublicIPv6}, func(ip string) bool { return ip == "" }),
			// The API carries it base64, and the instance reads it decoded.
			UserData: decodeBase64(i.UserData),
		})
	}
	return out
}

// decodeBase64 is the user data an instance reads: the API's base64 decoded
// (nil if it is none).
func decodeBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// DeleteServer deletes a server through the cloud's API, not through the
// cluster: as someone with the account's credentials would, behind its back.
func (e *Env) DeleteServer(ctx context.Context, id string) error {
	return e.cloud.deleteServer(ctx, e.APIURL, id)
}

// CloudscaleServers and ExoscaleServers are the boot simulation's views of
// the emulators, for those who run it without an Env.
func CloudscaleServers(emu *emucs.Emulator) bootsim.Cloud { return cloudscaleView{emu} }

// ExoscaleServers: see CloudscaleServers.
func ExoscaleServers(emu *emuexo.Emulator) bootsim.Cloud { return exoscaleView{emu} }
