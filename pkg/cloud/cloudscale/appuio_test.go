package cloudscale

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
)

// TestAppuioSpecMakesAppuiosServer: a spec exactly as appuio's provider
// (v0.4.0) encodes it — no apiVersion or kind, the empty metadata of its
// embedded ObjectMeta, every field written, nulls included — makes, at the
// emulator, the server appuio's Create makes of it (read from
// github.com/appuio/machine-api-provider-cloudscale, tag v0.4.0,
// pkg/machine/actuator.go: Create, buildServerTags, tagRootVolume,
// ensureAntiAffinityServerGroupForKey, and
// cloudscaleServerInterfacesFromProviderSpecInterfaces), field by field:
// name <machine>.<baseDomain>; tags the spec's plus the name and cluster
// tags; flavor, image, zone, root volume size; serverGroups (UUIDs) kept,
// and a group of antiAffinityKey added; useIPV6 false: no public IPv6;
// a Public interface and a Private one on networkUUID; sshKeys; the
// rootVolumeTags on the root volume (which this provider marks with the
// Machine's identity tags too: appuio's Update puts back exactly
// rootVolumeTags, a tag write, after a rollback).
func TestAppuioSpecMakesAppuiosServer(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.json")
	v := newEnv(t, emucs.Config{StateFile: state})
	yes := true
	nw, err := v.sdk.Networks.Create(v.ctx, &sdk.NetworkCreateRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: "priv", AutoCreateIPV4Subnet: &yes})
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := v.sdk.ServerGroups.Create(v.ctx, &sdk.ServerGroupRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: "fixed", Type: "anti-affinity"})
	if err != nil {
		t.Fatal(err)
	}
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g user@host"
	raw := `{"metadata":{"creationTimestamp":null},"userDataSecret":{"name":"cloudscale-user-data"},` +
		`"userDataSecretSelector":{"matchLabels":{"machineconfiguration.openshift.io/managed-ca-bundle-derived-from-configmap":""}},` +
		`"tokenSecret":{"name":"cloudscale-rw-token"},"baseDomain":"c1.example.com","zone":"rma1","antiAffinityKey":"worker",` +
		`"serverGroups":["` + fixed.UUID + `"],"tags":{"team":"platform"},"flavor":"flex-8-4","image":"debian-12",` +
		`"rootVolumeSizeGB":60,"rootVolumeTags":{"backup":"none"},"sshKeys":["` + key + `"],"useIPV6":false,` +
		`"interfaces":[{"type":"Public","networkUUID":"","addresses":null},{"type":"Private","networkUUID":"` + nw.UUID + `","addresses":null}]}`
	parsed, errs := New(Options{}).ParseSpec(machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(raw)}}, v1beta1.SpecPath)
	if len(errs) > 0 {
		t.Fatalf("appuio's spec refused: %v", errs.ToAggregate())
	}
	spec := parsed.(*Spec)
	s, created, err := v.client.CreateServer(v.ctx, ref("worker-7ws9q"), spec, []byte(`{"ignition":{"version":"3.1.0"}}`))
	if err != nil || !created {
		t.Fatal(err, created)
	}
	if _, err := v.client.SyncServer(v.ctx, ref("worker-7ws9q"), spec, s); err != nil {
		t.Fatal(err)
	}

	// The one difference from appuio's server, by design: the name is the
	// Machine's, which is its Node's, without baseDomain, so that the
	// cloudscale.ch CCM finds a Node's server by its name (issue 28); servers
	// appuio named <machine>.<baseDomain> stay their Machines' (ownName), and
	// appuio finds its servers by their tags, never by name.
	got := v.server(s.ID)
	if got.Name != "worker-7ws9q" || got.Flavor.Slug != "flex-8-4" || got.Image.Slug != "debian-12" || got.Zone.Slug != "rma1" ||
		len(got.Volumes) != 1 || got.Volumes[0].SizeGB != 60 {
		t.Errorf("server %q flavor %q image %q zone %q volumes %+v, want worker-7ws9q (appuio's without baseDomain), flex-8-4, debian-12, rma1, one of 60 GB",
			got.Name, got.Flavor.Slug, got.Image.Slug, got.Zone.Slug, got.Volumes)
	}
	if want := map[string]string{"team": "platform", v1beta1.TagMachineName: "worker-7ws9q", v1beta1.TagClusterID: testCluster}; !maps.Equal(got.Tags, want) {
		t.Errorf("server tags %v, want appuio's buildServerTags %v", got.Tags, want)
	}
	// serverGroups: the spec's, and one found or made by the key.
	var groups []string
	keyed := ""
	for _, g := range got.ServerGroups {
		groups = append(groups, g.UUID)
		if g.UUID != fixed.UUID {
			keyed = g.UUID
		}
	}
	if len(groups) != 2 || !slices.Contains(groups, fixed.UUID) || keyed == "" {
		t.Fatalf("server groups %v, want the spec's %s and one of antiAffinityKey worker", groups, fixed.UUID)
	}
	if g, err := v.sdk.ServerGroups.Get(v.ctx, keyed); err != nil || g.Tags[v1beta1.TagAntiAffinityKey] != "worker" || g.Type != "anti-affinity" {
		t.Errorf("the key's group %+v, %v: want an anti-affinity group tagged %s=worker, which appuio's provider finds by that tag", g, err, v1beta1.TagAntiAffinityKey)
	}
	// Interfaces: public without IPv6 (useIPV6 false), then the private network.
	if len(got.Interfaces) != 2 || got.Interfaces[0].Type != "public" || got.Interfaces[1].Type != "private" || got.Interfaces[1].Network.UUID != nw.UUID {
		t.Fatalf("interfaces %+v, want public and private on %s", got.Interfaces, nw.UUID)
	}
	for _, a := range got.Interfaces[0].Addresses {
		if a.Version == 6 {
			t.Errorf("the public interface has IPv6 %s, but useIPV6 is false", a.Address)
		}
	}
	// The API does not give the SSH keys back; the emulator's state does.
	if keys := storedServer(t, state, s.ID).SSHKeys; !slices.Equal(keys, []string{key}) {
		t.Errorf("ssh keys %v, want the spec's", keys)
	}
	// rootVolumeTags on the root volume.
	if rt := v.volume(got.Volumes[0].UUID).Tags; rt["backup"] != "none" {
		t.Errorf("root volume tags %v, want rootVolumeTags backup=none", rt)
	}
}
