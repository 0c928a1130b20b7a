package conformance

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"

	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale/openapicheck"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

// rhcosMirror serves the file the suite registers as a template.
var (
	rhcosURL    = "https://mirror.example/rhcos-4.20-exoscale.x86_64.qcow2"
	rhcosImage  = imagefetch.FakeQCOW2(16<<30, "rhcos-4.20")
	rhcosMirror = imagefetch.Mirror{rhcosURL: rhcosImage}
	rhcosMD5    = fmt.Sprintf("%x", md5.Sum(rhcosImage))
)

// The Exoscale SDK suite drives every operation the emulator serves through
// the unmodified egoscale v3 client: its own HTTP client (which retries),
// its signer and its Wait. Exoscale publishes no integration tests of its
// SDK that run against another endpoint, so this suite is ours; what keeps
// it honest is that the SDK is not, and that TestMain validates every
// request and answer against Exoscale's own OpenAPI document.

const (
	exoKey    = "EXO00112233445566778899aabb"
	exoSecret = "conformance-secret"
	ubuntu    = v3.UUID("188e6dc9-7b29-4db4-a8af-fc6368660738")
)

// exo is one emulator on a loopback port and the SDK's default client on it.
type exo struct {
	t   *testing.T
	ctx context.Context
	emu *exoscale.Emulator
	url string // the base URL; the default endpoint is url + "v2"
	c   *v3.Client
}

func startExoscale(t *testing.T, cfg exoscale.Config) *exo {
	t.Helper()
	cfg.Accounts = []exoscale.Account{{
		Name: "conformance", Key: exoKey, Secret: exoSecret,
		DeployTargets: []exoscale.DeployTargetSeed{{Zone: "ch-gva-2", Name: "dedicated-1"}},
	}}
	emu, err := exoscale.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = emu
	if exoscaleCheck != nil {
		// Violations are reported when the test and its subtests are done.
		var mu sync.Mutex
		var violations []string
		h = exoscaleCheck.Wrap(emu, func(v string) {
			mu.Lock()
			violations = append(violations, v)
			mu.Unlock()
		})
		t.Cleanup(func() {
			for _, v := range violations {
				t.Errorf("OpenAPI: %s", v)
			}
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	x := &exo{t: t, ctx: context.Background(), emu: emu, url: srv.URL + "/"}
	x.c = x.client(exoSecret, nil)
	return x
}

// client is the SDK's client on the default endpoint; httpClient nil keeps
// the SDK's own, retrying one.
func (x *exo) client(secret string, httpClient *http.Client) *v3.Client {
	opts := []v3.ClientOpt{v3.ClientOptWithEndpoint(v3.Endpoint(x.url + "v2"))}
	if httpClient != nil {
		opts = append(opts, v3.ClientOptWithHTTPClient(httpClient))
	}
	c, err := v3.NewClient(credentials.NewStaticCredentials(exoKey, secret), opts...)
	if err != nil {
		x.t.Fatal(err)
	}
	return c
}

// wait returns a function that follows the operation an SDK call answered
// with the SDK's Wait, to success.
func wait(t *testing.T, c *v3.Client) func(*v3.Operation, error) *v3.Operation {
	return func(op *v3.Operation, err error) *v3.Operation {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		done, err := c.Wait(context.Background(), op, v3.OperationStateSuccess)
		if err != nil {
			t.Fatalf("waiting for %s: %v", op.ID, err)
		}
		return done
	}
}

func isErr(t *testing.T, err, sentinel error) string {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	var ae *v3.APIError
	if !errors.As(err, &ae) || ae.Message == "" {
		t.Fatalf("error %v carries no API message", err)
	}
	return ae.Message
}

func instanceRequest(name string) v3.CreateInstanceRequest {
	return v3.CreateInstanceRequest{
		Name:         name,
		InstanceType: &v3.InstanceType{ID: v3.UUID(exoscale.InstanceTypeID("standard.medium"))},
		Template:     &v3.Template{ID: ubuntu},
		DiskSize:     20,
	}
}

const publicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE24vb5lOw6UH+utLRZvFRB3zvV+F3tQrELjlDWaavxp test@emulator"

func TestExoscaleSDKConformance(t *testing.T) {
	// Registered first, so it runs last, after the emulators have
	// reported their violations.
	t.Cleanup(func() {
		if !t.Failed() {
			exoscaleSuiteRan.Store(true)
		}
	})
	if exoscaleCheck == nil {
		t.Logf("no OpenAPI document at %q (set %s to its path): the suite runs, but its requests and answers are not validated. %s.",
			openapicheck.DocumentPath(), openapicheck.EnvDocument, openapicheck.Origin)
	}
	// Everything done at once: the SDK's Wait returns on the first answer
	// (but for a template's registration, which downloads its file from
	// rhcosMirror first).
	x := startExoscale(t, exoscale.Config{Seed: 1, ImageClient: &http.Client{Transport: rhcosMirror}})
	// Operations that stay pending: the SDK's Wait polls (every 3 s, its
	// own pace) until they end.
	slow := startExoscale(t, exoscale.Config{Seed: 1, BootTime: 300 * time.Millisecond, OperationTime: 200 * time.Millisecond})

	t.Run("zones", func(t *testing.T) {
		t.Parallel()
		zones, err := x.c.ListZones(x.ctx)
		if err != nil || len(zones.Zones) != 8 {
			t.Fatalf("ListZones: %+v, %v", zones, err)
		}
		ep, err := x.c.GetZoneAPIEndpoint(x.ctx, "at-vie-2")
		if err != nil {
			t.Fatal(err)
		}
		vie := x.c.WithEndpoint(ep)
		op := wait(t, vie)(vie.CreateInstance(x.ctx, instanceRequest("in-vienna")))
		if _, err := vie.GetInstance(x.ctx, op.Reference.ID); err != nil {
			t.Fatal(err)
		}
		_, err = x.c.GetInstance(x.ctx, op.Reference.ID)
		isErr(t, err, v3.ErrNotFound)
		if z, err := x.c.GetZoneName(x.ctx, ep); err != nil || z != "at-vie-2" {
			t.Fatalf("GetZoneName(%s) = %q, %v", ep, z, err)
		}
		wait(t, vie)(vie.DeleteInstance(x.ctx, op.Reference.ID))
	})

	t.Run("instance life cycle", func(t *testing.T) {
		t.Parallel()
		c := x.c
		wait(t, c)(c.RegisterSSHKey(x.ctx, v3.RegisterSSHKeyRequest{Name: "lifecycle", PublicKey: publicKey}))
		group := wait(t, c)(c.CreateAntiAffinityGroup(x.ctx, v3.CreateAntiAffinityGroupRequest{Name: "lifecycle"})).Reference.ID
		req := instanceRequest("worker-1")
		req.Labels = v3.Labels{"cluster": "conformance", "role": "worker"}
		req.SSHKeys = []v3.SSHKey{{Name: "lifecycle"}}
		req.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: group}}
		req.UserData = "I2Nsb3VkLWNvbmZpZwo="
		req.PublicIPAssignment = v3.PublicIPAssignmentDual
		op := wait(t, c)(c.CreateInstance(x.ctx, req))
		id := op.Reference.ID
		inst, err := c.GetInstance(x.ctx, id)
		if err != nil || inst.State != v3.InstanceStateRunning || inst.PublicIP == nil || inst.Ipv6Address == "" || inst.UserData != req.UserData {
			t.Fatalf("GetInstance: %+v, %v", inst, err)
		}
		other := instanceRequest("master-1")
		other.Labels = v3.Labels{"cluster": "conformance", "role": "master"}
		masterID := wait(t, c)(c.CreateInstance(x.ctx, other)).Reference.ID

		l, err := c.ListInstances(x.ctx, v3.ListInstancesWithLabels("cluster=conformance role=worker"))
		if err != nil || len(l.Instances) != 1 || l.Instances[0].ID != id {
			t.Fatalf("ListInstances by labels: %+v, %v", l, err)
		}
		if found, err := l.FindListInstancesResponseInstances("worker-1"); err != nil || found.ID != id {
			t.Fatalf("FindListInstancesResponseInstances: %v", err)
		}

		wait(t, c)(c.UpdateInstance(x.ctx, id, v3.UpdateInstanceRequest{Name: "worker-1a"}))
		if inst, _ := c.GetInstance(x.ctx, id); inst.Name != "worker-1a" || inst.Labels["role"] != "worker" {
			t.Fatalf("after rename (labels null: unchanged): %q %v", inst.Name, inst.Labels)
		}
		wait(t, c)(c.UpdateInstance(x.ctx, id, v3.UpdateInstanceRequest{Labels: v3.Labels{"cluster": "conformance", "role": "infra"}}))
		wait(t, c)(c.ResetInstanceField(x.ctx, masterID, v3.ResetInstanceFieldFieldLabels))
		if inst, _ := c.GetInstance(x.ctx, masterID); len(inst.Labels) != 0 {
			t.Fatalf("labels after reset: %v", inst.Labels)
		}

		wait(t, c)(c.StopInstance(x.ctx, id))
		wait(t, c)(c.ScaleInstance(x.ctx, id, v3.ScaleInstanceRequest{InstanceType: &v3.InstanceType{ID: v3.UUID(exoscale.InstanceTypeID("standard.large"))}}))
		wait(t, c)(c.ResizeInstanceDisk(x.ctx, id, v3.ResizeInstanceDiskRequest{DiskSize: 40}))
		wait(t, c)(c.StartInstance(x.ctx, id, v3.StartInstanceRequest{}))
		wait(t, c)(c.RebootInstance(x.ctx, id))
		info, _ := x.emu.Instance(string(id))
		if info.State != "running" || info.InstanceType != "standard.large" || info.DiskSizeGiB != 40 || info.CPUs != 4 {
			t.Fatalf("after stop, scale, resize, start and reboot: %+v", info)
		}

		g, err := c.GetAntiAffinityGroup(x.ctx, group)
		if err != nil || len(g.Instances) != 1 || g.Instances[0].ID != id {
			t.Fatalf("GetAntiAffinityGroup: %+v, %v", g, err)
		}
		groups, err := c.ListAntiAffinityGroups(x.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := groups.FindAntiAffinityGroup("lifecycle"); err != nil {
			t.Fatal(err)
		}
		_, err = c.DeleteAntiAffinityGroup(x.ctx, group)
		isErr(t, err, v3.ErrConflict)
		wait(t, c)(c.DeleteInstance(x.ctx, id))
		wait(t, c)(c.DeleteInstance(x.ctx, masterID))
		_, err = c.GetInstance(x.ctx, id)
		isErr(t, err, v3.ErrNotFound)
		wait(t, c)(c.DeleteAntiAffinityGroup(x.ctx, group))
		wait(t, c)(c.DeleteSSHKey(x.ctx, "lifecycle"))
	})

	t.Run("pending operations followed by Wait", func(t *testing.T) {
		t.Parallel()
		c := slow.c
		op, err := c.CreateInstance(slow.ctx, instanceRequest("slow"))
		if err != nil || op.State != v3.OperationStatePending {
			t.Fatalf("create answered %+v, %v; want pending", op, err)
		}
		// The instance's ID is known, and the instance there, at once.
		if inst, err := c.GetInstance(slow.ctx, op.Reference.ID); err != nil || inst.State != v3.InstanceStateStarting {
			t.Fatalf("instance of a pending creation: %+v, %v", inst, err)
		}
		wait(t, c)(op, nil)
		if inst, _ := c.GetInstance(slow.ctx, op.Reference.ID); inst.State != v3.InstanceStateRunning {
			t.Fatalf("after Wait: %s", inst.State)
		}
		if got, err := c.GetOperation(slow.ctx, op.ID); err != nil || got.State != v3.OperationStateSuccess {
			t.Fatalf("GetOperation: %+v, %v", got, err)
		}
		wait(t, c)(c.DeleteInstance(slow.ctx, op.Reference.ID))
		_, err = c.GetInstance(slow.ctx, op.Reference.ID)
		isErr(t, err, v3.ErrNotFound)
	})

	t.Run("failed operation", func(t *testing.T) {
		t.Parallel()
		if err := slow.emu.AddOperationFailure(exoscale.OperationFailure{Command: "create-instance", Rate: 1, Times: 1, Reason: "unavailable", Message: "no capacity"}); err != nil {
			t.Fatal(err)
		}
		op, err := slow.c.CreateInstance(slow.ctx, instanceRequest("doomed"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = slow.c.Wait(slow.ctx, op, v3.OperationStateSuccess)
		if err == nil || !strings.Contains(err.Error(), `state: failure, reason: "unavailable", message: "no capacity"`) {
			t.Fatalf("Wait on a failing creation: %v", err)
		}
		_, err = slow.c.GetInstance(slow.ctx, op.Reference.ID)
		isErr(t, err, v3.ErrNotFound)
	})

	t.Run("catalog, quotas and deploy targets", func(t *testing.T) {
		t.Parallel()
		c := x.c
		types, err := c.ListInstanceTypes(x.ctx)
		if err != nil {
			t.Fatal(err)
		}
		medium, err := types.FindInstanceTypeByIdOrFamilyAndSize("standard.medium")
		if err != nil || medium.Cpus != 2 || medium.Memory != 4<<30 {
			t.Fatalf("standard.medium: %+v, %v", medium, err)
		}
		if got, err := c.GetInstanceType(x.ctx, medium.ID); err != nil || got.Size != v3.InstanceTypeSizeMedium {
			t.Fatalf("GetInstanceType: %+v, %v", got, err)
		}
		public, err := c.ListTemplates(x.ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibilityPublic))
		if err != nil {
			t.Fatal(err)
		}
		if tpl, err := public.FindTemplate("Linux Ubuntu 24.04 LTS 64-bit"); err != nil || tpl.ID != ubuntu {
			t.Fatalf("FindTemplate: %+v, %v", tpl, err)
		}
		private, err := c.ListTemplates(x.ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibilityPrivate))
		if err != nil {
			t.Fatal(err)
		}
		rhcos, err := private.FindTemplate("rhcos-4.19")
		if err != nil {
			t.Fatalf("the seeded RHCOS template: %v", err)
		}
		if got, err := c.GetTemplate(x.ctx, rhcos.ID); err != nil || got.BootMode != v3.TemplateBootModeUefi {
			t.Fatalf("GetTemplate: %+v, %v", got, err)
		}
		quotas, err := c.ListQuotas(x.ctx)
		if err != nil || len(quotas.Quotas) == 0 {
			t.Fatalf("ListQuotas: %+v, %v", quotas, err)
		}
		if q, err := c.GetQuota(x.ctx, "instance"); err != nil || q.Limit != exoscale.DefaultQuotas["instance"] {
			t.Fatalf("GetQuota: %+v, %v", q, err)
		}
		targets, err := c.ListDeployTargets(x.ctx)
		if err != nil {
			t.Fatal(err)
		}
		dt, err := targets.FindDeployTarget("dedicated-1")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.GetDeployTarget(x.ctx, dt.ID); err != nil || got.Type != v3.DeployTargetTypeDedicated {
			t.Fatalf("GetDeployTarget: %+v, %v", got, err)
		}
		req := instanceRequest("on-dedicated")
		req.DeployTarget = &v3.DeployTarget{ID: dt.ID}
		id := wait(t, c)(c.CreateInstance(x.ctx, req)).Reference.ID
		wait(t, c)(c.DeleteInstance(x.ctx, id))
	})

	t.Run("templates", func(t *testing.T) {
		t.Parallel()
		c := x.c
		op := wait(t, c)(c.RegisterTemplate(x.ctx, v3.RegisterTemplateRequest{
			Name: "rhcos-4.20", URL: rhcosURL,
			Checksum: rhcosMD5, SSHKeyEnabled: v3.Bool(true), PasswordEnabled: v3.Bool(false),
			BootMode: v3.RegisterTemplateRequestBootModeUefi, DefaultUser: "core",
		}))
		id := op.Reference.ID
		wait(t, c)(c.UpdateTemplate(x.ctx, id, v3.UpdateTemplateRequest{Description: "RHCOS 4.20"}))
		if tpl, err := c.GetTemplate(x.ctx, id); err != nil || tpl.Description != "RHCOS 4.20" {
			t.Fatalf("GetTemplate: %+v, %v", tpl, err)
		}
		copied := wait(t, c)(c.CopyTemplate(x.ctx, id, v3.CopyTemplateRequest{TargetZone: &v3.Zone{Name: "de-fra-1"}}))
		ep, err := c.GetZoneAPIEndpoint(x.ctx, "de-fra-1")
		if err != nil {
			t.Fatal(err)
		}
		fra := c.WithEndpoint(ep)
		req := instanceRequest("from-copy")
		req.Template = &v3.Template{ID: copied.Reference.ID}
		inst := wait(t, fra)(fra.CreateInstance(x.ctx, req)).Reference.ID
		wait(t, fra)(fra.DeleteInstance(x.ctx, inst))
		wait(t, fra)(fra.DeleteTemplate(x.ctx, copied.Reference.ID))
		wait(t, c)(c.DeleteTemplate(x.ctx, id))
		_, err = c.GetTemplate(x.ctx, id)
		isErr(t, err, v3.ErrNotFound)
	})

	t.Run("security groups", func(t *testing.T) {
		t.Parallel()
		c := x.c
		sg := wait(t, c)(c.CreateSecurityGroup(x.ctx, v3.CreateSecurityGroupRequest{Name: "conformance-nodes", Description: "nodes"})).Reference.ID
		wait(t, c)(c.AddRuleToSecurityGroup(x.ctx, sg, v3.AddRuleToSecurityGroupRequest{
			FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolTCP,
			Network: "0.0.0.0/0", StartPort: 6443, EndPort: 6443, Description: "API",
		}))
		wait(t, c)(c.AddRuleToSecurityGroup(x.ctx, sg, v3.AddRuleToSecurityGroupRequest{
			FlowDirection: v3.AddRuleToSecurityGroupRequestFlowDirectionIngress, Protocol: v3.AddRuleToSecurityGroupRequestProtocolUDP,
			SecurityGroup: &v3.SecurityGroupResource{ID: sg}, StartPort: 4789, EndPort: 4789,
		}))
		wait(t, c)(c.AddExternalSourceToSecurityGroup(x.ctx, sg, v3.AddExternalSourceToSecurityGroupRequest{Cidr: "198.51.100.0/24"}))
		group, err := c.GetSecurityGroup(x.ctx, sg)
		if err != nil || len(group.Rules) != 2 || !slices.Equal(group.ExternalSources, []string{"198.51.100.0/24"}) {
			t.Fatalf("GetSecurityGroup: %+v, %v", group, err)
		}
		wait(t, c)(c.RemoveExternalSourceFromSecurityGroup(x.ctx, sg, v3.RemoveExternalSourceFromSecurityGroupRequest{Cidr: "198.51.100.0/24"}))
		wait(t, c)(c.DeleteRuleFromSecurityGroup(x.ctx, sg, group.Rules[0].ID))

		id := wait(t, c)(c.CreateInstance(x.ctx, instanceRequest("sg-member"))).Reference.ID
		wait(t, c)(c.AttachInstanceToSecurityGroup(x.ctx, sg, v3.AttachInstanceToSecurityGroupRequest{Instance: &v3.Instance{ID: id}}))
		_, err = c.DeleteSecurityGroup(x.ctx, sg)
		isErr(t, err, v3.ErrConflict)
		wait(t, c)(c.DetachInstanceFromSecurityGroup(x.ctx, sg, v3.DetachInstanceFromSecurityGroupRequest{Instance: &v3.Instance{ID: id}}))
		all, err := c.ListSecurityGroups(x.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := all.FindSecurityGroup("conformance-nodes"); err != nil {
			t.Fatal(err)
		}
		wait(t, c)(c.DeleteInstance(x.ctx, id))
		wait(t, c)(c.DeleteSecurityGroup(x.ctx, sg))
	})

	t.Run("private networks", func(t *testing.T) {
		t.Parallel()
		c := x.c
		pn := wait(t, c)(c.CreatePrivateNetwork(x.ctx, v3.CreatePrivateNetworkRequest{
			Name: "conformance-net", StartIP: net.ParseIP("10.10.0.10"), EndIP: net.ParseIP("10.10.0.200"), Netmask: net.ParseIP("255.255.255.0"),
			Labels: v3.Labels{"cluster": "conformance"},
		})).Reference.ID
		id := wait(t, c)(c.CreateInstance(x.ctx, instanceRequest("pn-member"))).Reference.ID
		wait(t, c)(c.AttachInstanceToPrivateNetwork(x.ctx, pn, v3.AttachInstanceToPrivateNetworkRequest{
			Instance: &v3.AttachInstanceToPrivateNetworkRequestInstance{ID: id}, IP: net.ParseIP("10.10.0.42"),
		}))
		wait(t, c)(c.UpdatePrivateNetworkInstanceIP(x.ctx, pn, v3.UpdatePrivateNetworkInstanceIPRequest{
			Instance: &v3.UpdatePrivateNetworkInstanceIPRequestInstance{ID: id}, IP: net.ParseIP("10.10.0.43"),
		}))
		got, err := c.GetPrivateNetwork(x.ctx, pn)
		if err != nil || len(got.Leases) != 1 || got.Leases[0].IP.String() != "10.10.0.43" || got.Leases[0].InstanceID != id {
			t.Fatalf("GetPrivateNetwork: %+v, %v", got, err)
		}
		wait(t, c)(c.UpdatePrivateNetwork(x.ctx, pn, v3.UpdatePrivateNetworkRequest{Description: "updated"}))
		wait(t, c)(c.ResetPrivateNetworkField(x.ctx, pn, v3.ResetPrivateNetworkFieldFieldLabels))
		_, err = c.DeletePrivateNetwork(x.ctx, pn)
		isErr(t, err, v3.ErrConflict)
		wait(t, c)(c.DetachInstanceFromPrivateNetwork(x.ctx, pn, v3.DetachInstanceFromPrivateNetworkRequest{Instance: &v3.Instance{ID: id}}))
		all, err := c.ListPrivateNetworks(x.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if found, err := all.FindPrivateNetwork("conformance-net"); err != nil || found.Description != "updated" || len(found.Labels) != 0 {
			t.Fatalf("FindPrivateNetwork: %+v, %v", found, err)
		}
		wait(t, c)(c.DeleteInstance(x.ctx, id))
		wait(t, c)(c.DeletePrivateNetwork(x.ctx, pn))
	})

	t.Run("instance pools", func(t *testing.T) {
		t.Parallel()
		// With operations that stay pending: the SDK's Wait follows the
		// pool's create, evict, scale and delete to their end.
		c := slow.c
		req := v3.CreateInstancePoolRequest{
			Name: "conformance_worker-0", Size: 3, InstancePrefix: "worker", DiskSize: 20,
			InstanceType: &v3.InstanceType{ID: v3.UUID(exoscale.InstanceTypeID("standard.medium"))},
			Template:     &v3.Template{ID: ubuntu},
		}
		pool := wait(t, c)(c.CreateInstancePool(x.ctx, req)).Reference.ID
		p, err := c.GetInstancePool(x.ctx, pool)
		if err != nil || p.Size != 3 || len(p.Instances) != 3 || p.State != v3.InstancePoolStateRunning {
			t.Fatalf("GetInstancePool: %+v, %v", p, err)
		}
		members, err := c.ListInstances(x.ctx, v3.ListInstancesWithManagerID(pool))
		if err != nil || len(members.Instances) != 3 || members.Instances[0].Manager == nil || members.Instances[0].Manager.Type != v3.ManagerTypeInstancePool {
			t.Fatalf("ListInstances of the pool: %+v, %v", members, err)
		}
		evicted := members.Instances[1].ID
		wait(t, c)(c.EvictInstancePoolMembers(x.ctx, pool, v3.EvictInstancePoolMembersRequest{Instances: []v3.UUID{evicted}}))
		if p, err = c.GetInstancePool(x.ctx, pool); err != nil || p.Size != 2 || slices.ContainsFunc(p.Instances, func(i v3.Instance) bool { return i.ID == evicted }) {
			t.Fatalf("after the evict: %+v, %v", p, err)
		}
		_, err = c.GetInstance(x.ctx, evicted)
		isErr(t, err, v3.ErrNotFound)
		wait(t, c)(c.ScaleInstancePool(x.ctx, pool, v3.ScaleInstancePoolRequest{Size: 1}))
		all, err := c.ListInstancePools(x.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if found, err := all.FindInstancePool("conformance_worker-0"); err != nil || found.Size != 1 {
			t.Fatalf("FindInstancePool: %+v, %v", found, err)
		}
		wait(t, c)(c.DeleteInstancePool(x.ctx, pool))
		_, err = c.GetInstancePool(x.ctx, pool)
		isErr(t, err, v3.ErrNotFound)
	})

	t.Run("ssh keys", func(t *testing.T) {
		t.Parallel()
		c := x.c
		wait(t, c)(c.RegisterSSHKey(x.ctx, v3.RegisterSSHKeyRequest{Name: "conformance", PublicKey: publicKey}))
		k, err := c.GetSSHKey(x.ctx, "conformance")
		if err != nil || k.Fingerprint != "d4:18:38:9a:ad:d9:be:a6:7e:26:22:77:29:ce:1d:f2" {
			t.Fatalf("GetSSHKey: %+v, %v", k, err)
		}
		keys, err := c.ListSSHKeys(x.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keys.FindSSHKey(k.Fingerprint); err != nil {
			t.Fatal(err)
		}
		_, err = c.RegisterSSHKey(x.ctx, v3.RegisterSSHKeyRequest{Name: "conformance", PublicKey: publicKey})
		isErr(t, err, v3.ErrConflict)
		wait(t, c)(c.DeleteSSHKey(x.ctx, "conformance"))
	})

	t.Run("error classes", func(t *testing.T) {
		t.Parallel()
		c := x.c
		_, err := c.GetInstance(x.ctx, "6f8e2c7a-1234-4abc-8def-0123456789ab")
		isErr(t, err, v3.ErrNotFound)
		bad := instanceRequest("too-small")
		bad.DiskSize = 5
		msg := isErr(t, func() error { _, err := c.CreateInstance(x.ctx, bad); return err }(), v3.ErrBadRequest)
		if !strings.Contains(msg, "disk-size") || !strings.Contains(msg, "between 10 51200") {
			t.Fatalf("400 message %q does not name the field and its range", msg)
		}
		_, err = c.CreateAntiAffinityGroup(x.ctx, v3.CreateAntiAffinityGroupRequest{Name: "twice"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateAntiAffinityGroup(x.ctx, v3.CreateAntiAffinityGroupRequest{Name: "twice"})
		isErr(t, err, v3.ErrConflict)
		_, err = x.client("wrong-secret", nil).ListInstances(x.ctx)
		isErr(t, err, v3.ErrForbidden)
	})

	t.Run("transient faults", func(t *testing.T) {
		t.Parallel()
		f := startExoscale(t, exoscale.Config{Seed: 1})
		h := f.emu.Harness()
		// The SDK's default client retries a 503 by itself.
		if err := h.AddRule(harness.Rule{Route: "GET /v2/instance-type", ErrorRate: 1, ErrorStatus: 503, Times: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.ListInstanceTypes(f.ctx); err != nil {
			t.Fatalf("a single 503 got through the SDK's retries: %v", err)
		}
		if n := h.Count("GET /v2/instance-type"); n != 2 {
			t.Fatalf("%d requests, want the 503 and its retry", n)
		}
		// A client that does not retry sees each class.
		once := f.client(exoSecret, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
		for status, sentinel := range map[int]error{429: v3.ErrTooManyRequests, 503: v3.ErrServiceUnavailable, 500: v3.ErrInternalServerError} {
			if err := h.SetRules([]harness.Rule{{Route: "GET /v2/quota", ErrorRate: 1, ErrorStatus: status}}); err != nil {
				t.Fatal(err)
			}
			_, err := once.ListQuotas(f.ctx)
			isErr(t, err, sentinel)
		}
		// A lost answer to a create: the default client retries the POST,
		// and the cloud makes a second instance. Clients must look before
		// they create again.
		if err := h.SetRules([]harness.Rule{{Route: "POST /v2/instance", LostResponseRate: 1, Times: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.CreateInstance(f.ctx, instanceRequest("twice")); err != nil {
			t.Fatalf("the retry of a lost create: %v", err)
		}
		if n := f.emu.CountInstances(); n != 2 {
			t.Fatalf("%d instances after a lost answer and the SDK's retry, want 2", n)
		}
	})
}
