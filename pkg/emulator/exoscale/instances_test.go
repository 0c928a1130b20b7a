package exoscale_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	v3 "github.com/exoscale/egoscale/v3"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

func TestCreateInstanceValidation(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Accounts: []emu.Account{{
		Name: "small", Key: emu.DefaultAPIKey, Secret: emu.DefaultAPISecret,
		Quotas: map[string]int64{"gpu": 0},
	}}})
	c := v.client
	fullGroup := v.op(c.CreateAntiAffinityGroup(v.ctx, v3.CreateAntiAffinityGroupRequest{Name: "full"})).Reference.ID
	for i := range emu.MaxInstancesPerAntiAffinityGroup {
		req := instanceReq("member-" + string(rune('a'+i)))
		req.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: fullGroup}}
		v.create(c, req)
	}
	missing := v3.UUID("6f8e2c7a-1234-4abc-8def-0123456789ab")

	for _, tc := range []struct {
		name     string
		change   func(*v3.CreateInstanceRequest)
		sentinel error
		want     []string
	}{
		{"disk too small", func(r *v3.CreateInstanceRequest) { r.DiskSize = 5 }, v3.ErrBadRequest,
			[]string{"Invalid value in disk-size (description: `Instance disk size in GiB`) - should be an Integer between 10 51200"}},
		{"disk too large", func(r *v3.CreateInstanceRequest) { r.DiskSize = 51201 }, v3.ErrBadRequest, []string{"disk-size", "between 10 51200"}},
		{"underscore in name", func(r *v3.CreateInstanceRequest) { r.Name = "my_worker" }, v3.ErrBadRequest, []string{"Invalid value in name", `no "_"`}},
		{"name too long", func(r *v3.CreateInstanceRequest) { r.Name = strings.Repeat("a", 256) }, v3.ErrBadRequest, []string{"Invalid value in name"}},
		{"user data not base64", func(r *v3.CreateInstanceRequest) { r.UserData = "#cloud-config" }, v3.ErrBadRequest, []string{"Invalid value in user-data", "32768"}},
		{"user data too long", func(r *v3.CreateInstanceRequest) {
			r.UserData = base64.StdEncoding.EncodeToString(make([]byte, 24579))
		}, v3.ErrBadRequest, []string{"Invalid value in user-data"}},
		{"unknown instance type", func(r *v3.CreateInstanceRequest) { r.InstanceType = &v3.InstanceType{ID: missing} }, v3.ErrBadRequest, []string{"instance-type", "not found"}},
		{"GPU type without authorization", func(r *v3.CreateInstanceRequest) {
			r.InstanceType = &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("gpu2.small"))}
		}, v3.ErrForbidden, []string{"gpu2.small", "authorization"}},
		{"unknown template", func(r *v3.CreateInstanceRequest) { r.Template = &v3.Template{ID: missing} }, v3.ErrBadRequest, []string{"Invalid value in template", "not found"}},
		{"template in another zone", func(r *v3.CreateInstanceRequest) {
			r.Template = &v3.Template{ID: v3.UUID(v.emu.TemplateID("small", "de-fra-1", "rhcos-4.19"))}
		}, v3.ErrBadRequest, []string{"template", "zone de-fra-1"}},
		{"disk smaller than the template", func(r *v3.CreateInstanceRequest) {
			r.Template = &v3.Template{ID: v3.UUID(v.emu.TemplateID("small", "ch-gva-2", "rhcos-4.19"))}
			r.DiskSize = 12
		}, v3.ErrBadRequest, []string{"disk-size", "at least 16 GiB"}},
		{"bad public IP assignment", func(r *v3.CreateInstanceRequest) { r.PublicIPAssignment = "ipv6-only" }, v3.ErrBadRequest, []string{"public-ip-assignment", "inet4, dual, none"}},
		{"unknown security group", func(r *v3.CreateInstanceRequest) { r.SecurityGroups = []v3.SecurityGroup{{ID: missing}} }, v3.ErrBadRequest, []string{"security-groups", "not found"}},
		{"unknown anti-affinity group", func(r *v3.CreateInstanceRequest) {
			r.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: missing}}
		}, v3.ErrBadRequest, []string{"anti-affinity-groups", "not found"}},
		{"full anti-affinity group", func(r *v3.CreateInstanceRequest) {
			r.AntiAffinityGroups = []v3.AntiAffinityGroup{{ID: fullGroup}}
		}, v3.ErrBadRequest, []string{"anti-affinity-groups", "8 instances", "the most a group can hold is 8"}},
		{"unknown SSH key", func(r *v3.CreateInstanceRequest) { r.SSHKeys = []v3.SSHKey{{Name: "nobody"}} }, v3.ErrBadRequest, []string{"ssh-keys", `"nobody" not found`}},
		{"unknown deploy target", func(r *v3.CreateInstanceRequest) { r.DeployTarget = &v3.DeployTarget{ID: missing} }, v3.ErrBadRequest, []string{"deploy-target", "not found"}},
		{"label key too long", func(r *v3.CreateInstanceRequest) { r.Labels = v3.Labels{strings.Repeat("k", 256): "v"} }, v3.ErrBadRequest, []string{"Invalid value in labels"}},
	} {
		req := instanceReq("valid")
		tc.change(&req)
		_, err := c.CreateInstance(v.ctx, req)
		msg := apiError(t, err, tc.sentinel)
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not contain %q", tc.name, msg, w)
			}
		}
	}
	if n := v.emu.CountInstances(); n != emu.MaxInstancesPerAntiAffinityGroup {
		t.Fatalf("%d instances after refused creates, want only the %d group members", n, emu.MaxInstancesPerAntiAffinityGroup)
	}

	// Wrong types and missing required fields, as a client without the
	// SDK's types sends them.
	for body, want := range map[string]string{
		`{"instance-type":{"id":"b6e9d1e8-89fc-4db3-aaa4-9b4c5b1d0844"},"template":{"id":"188e6dc9-7b29-4db4-a8af-fc6368660738"}}`:                               "Invalid value in disk-size",
		`{"disk-size":"ten","instance-type":{"id":"b6e9d1e8-89fc-4db3-aaa4-9b4c5b1d0844"},"template":{"id":"188e6dc9-7b29-4db4-a8af-fc6368660738"}}`:             "Invalid value in disk-size",
		`{"disk-size":10,"template":{"id":"188e6dc9-7b29-4db4-a8af-fc6368660738"}}`:                                                                              "Invalid value in instance-type",
		`{"disk-size":10,"instance-type":{"id":"b6e9d1e8-89fc-4db3-aaa4-9b4c5b1d0844"}}`:                                                                         "Invalid value in template",
		`{"disk-size":10,"instance-type":{"id":"b6e9d1e8-89fc-4db3-aaa4-9b4c5b1d0844"},"template":{"id":"188e6dc9-7b29-4db4-a8af-fc6368660738"},"labels":["a"]}`: "Invalid value in labels",
		`{"disk-size":10,`: "Malformed JSON",
		``:                 "Missing request body",
	} {
		resp, b := v.raw("POST", "/v2/instance", body, true)
		wantStatus(t, resp, b, http.StatusBadRequest)
		wantMessage(t, b, want)
	}
}

func TestCreateInstanceOptions(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Accounts: []emu.Account{{
		Name: "dedicated", Key: emu.DefaultAPIKey, Secret: emu.DefaultAPISecret,
		DeployTargets: []emu.DeployTargetSeed{{Zone: "ch-gva-2", Name: "dt-1", Description: "my hypervisors"}},
	}}})
	c := v.client
	targets, err := c.ListDeployTargets(v.ctx)
	if err != nil || len(targets.DeployTargets) != 1 {
		t.Fatalf("deploy targets %+v, %v", targets, err)
	}
	dt := targets.DeployTargets[0]
	if dt.Name != "dt-1" || dt.Type != v3.DeployTargetTypeDedicated || dt.Description != "my hypervisors" {
		t.Fatalf("deploy target %+v", dt)
	}
	if got, err := c.GetDeployTarget(v.ctx, dt.ID); err != nil || got.Name != "dt-1" {
		t.Fatalf("GetDeployTarget: %+v, %v", got, err)
	}
	fraTargets, err := v.sdk(emu.DefaultAPIKey, emu.DefaultAPISecret, "de-fra-1").ListDeployTargets(v.ctx)
	if err != nil || len(fraTargets.DeployTargets) != 0 {
		t.Fatalf("de-fra-1 lists deploy targets %+v, %v; they are zone-local", fraTargets, err)
	}

	key := v.op(c.RegisterSSHKey(v.ctx, v3.RegisterSSHKeyRequest{Name: "admin", PublicKey: testPublicKey}))
	if key.Reference.Command != "register-ssh-key" {
		t.Fatalf("reference %+v", key.Reference)
	}
	userData := base64.StdEncoding.EncodeToString([]byte(`{"ignition":{"version":"3.4.0"}}`))
	req := instanceReq("full")
	req.PublicIPAssignment = v3.PublicIPAssignmentDual
	req.SSHKeys = []v3.SSHKey{{Name: "admin"}}
	req.UserData = userData
	req.DeployTarget = &v3.DeployTarget{ID: dt.ID}
	req.Labels = v3.Labels{"a": "1"}
	req.SecurebootEnabled = ptr(true)
	req.TpmEnabled = ptr(true)
	_, id := v.create(c, req)
	inst := v.getInstance(c, id)
	if inst.Ipv6Address == "" || !strings.HasPrefix(inst.Ipv6Address, "2001:db8:e0::") || inst.PublicIP == nil {
		t.Fatalf("dual instance has IPv4 %v and IPv6 %q", inst.PublicIP, inst.Ipv6Address)
	}
	if inst.UserData != userData || inst.DeployTarget == nil || inst.DeployTarget.ID != dt.ID {
		t.Fatalf("user data %q and deploy target %+v not kept", inst.UserData, inst.DeployTarget)
	}
	if len(inst.SSHKeys) != 1 || inst.SSHKeys[0].Name != "admin" || inst.SSHKeys[0].Fingerprint == "" {
		t.Fatalf("ssh keys %+v", inst.SSHKeys)
	}
	if inst.SecurebootEnabled == nil || !*inst.SecurebootEnabled || inst.TpmEnabled == nil || !*inst.TpmEnabled {
		t.Fatalf("secure boot %v, TPM %v", inst.SecurebootEnabled, inst.TpmEnabled)
	}
	if inst.MACAddress == "" || !strings.HasPrefix(inst.MACAddress, "06:") {
		t.Fatalf("MAC address %q", inst.MACAddress)
	}

	// No public address at all, and the deprecated IPv6 switch.
	req = instanceReq("private")
	req.PublicIPAssignment = v3.PublicIPAssignmentNone
	_, id = v.create(c, req)
	if inst := v.getInstance(c, id); inst.PublicIP != nil || inst.Ipv6Address != "" || inst.PublicIPAssignment != v3.PublicIPAssignmentNone {
		t.Fatalf("instance without public IPs has %v, %q", inst.PublicIP, inst.Ipv6Address)
	}
	req = instanceReq("legacy-v6")
	req.Ipv6Enabled = ptr(true)
	_, id = v.create(c, req)
	if inst := v.getInstance(c, id); inst.PublicIPAssignment != v3.PublicIPAssignmentDual || inst.Ipv6Address == "" {
		t.Fatalf("ipv6-enabled gave %q, %q", inst.PublicIPAssignment, inst.Ipv6Address)
	}

	// Without a name the API makes one up.
	req = instanceReq("")
	_, id = v.create(c, req)
	if name := v.getInstance(c, id).Name; name != "vm-"+string(id) {
		t.Fatalf("unnamed instance is called %q", name)
	}

	// Public addresses are never handed out twice.
	seen := map[string]bool{}
	for _, i := range v.emu.Instances() {
		for _, ip := range []string{i.PublicIPv4, i.PublicIPv6} {
			if ip != "" && seen[ip] {
				t.Fatalf("address %s handed out twice", ip)
			}
			seen[ip] = true
		}
	}
}

func TestInstanceQuotas(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{Accounts: []emu.Account{{
		Name: "limited", Key: emu.DefaultAPIKey, Secret: emu.DefaultAPISecret,
		Quotas: map[string]int64{"instance": 2, "gpu": 2},
	}}})
	c := v.client
	gpuReq := instanceReq("gpu-1")
	gpuReq.InstanceType = &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("gpu2.medium"))}
	v.create(c, gpuReq)
	gpuReq.Name, gpuReq.InstanceType = "gpu-2", &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("gpu2.small"))}
	_, err := c.CreateInstance(v.ctx, gpuReq)
	wantContains(t, apiError(t, err, v3.ErrForbidden), "Quota exceeded for gpu", "limit is 2", "2 are in use")

	_, second := v.create(c, instanceReq("second"))
	_, err = c.CreateInstance(v.ctx, instanceReq("third"))
	wantContains(t, apiError(t, err, v3.ErrForbidden), "Quota exceeded for instance", "limit is 2")

	q, err := c.GetQuota(v.ctx, "instance")
	if err != nil || q.Usage != 2 || q.Limit != 2 {
		t.Fatalf("instance quota %+v, %v", q, err)
	}
	quotas, err := c.ListQuotas(v.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for _, q := range quotas.Quotas {
		got[q.Resource] = [2]int64{q.Usage, q.Limit}
	}
	if got["gpu"] != [2]int64{2, 2} || got["instance"] != [2]int64{2, 2} || got["private-network"] != [2]int64{0, 10} {
		t.Fatalf("quotas %v", got)
	}
	_, err = c.GetQuota(v.ctx, "unicorns")
	apiError(t, err, v3.ErrNotFound)

	// A deleted instance frees its place when it is gone.
	v.op(c.DeleteInstance(v.ctx, second))
	v.create(c, instanceReq("third"))
}

func TestListInstancesFilters(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	for _, tc := range []struct {
		name   string
		labels v3.Labels
	}{
		{"w1", v3.Labels{"cluster": "c1", "role": "worker"}},
		{"w2", v3.Labels{"cluster": "c1", "role": "worker", "pool": "gpu"}},
		{"m1", v3.Labels{"cluster": "c1", "role": "master"}},
		{"x1", v3.Labels{"cluster": "c2", "role": "worker"}},
		{"none", nil},
	} {
		req := instanceReq(tc.name)
		req.Labels = tc.labels
		v.create(c, req)
	}
	names := func(opts ...v3.ListInstancesOpt) []string {
		t.Helper()
		l, err := c.ListInstances(v.ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range l.Instances {
			out = append(out, i.Name)
		}
		return out
	}
	for filter, want := range map[string][]string{
		"":                             {"w1", "w2", "m1", "x1", "none"},
		"cluster=c1":                   {"w1", "w2", "m1"},
		"cluster=c1 role=worker":       {"w1", "w2"},
		"role=worker cluster=c1":       {"w1", "w2"},
		"cluster=c1 role=worker pool=": nil,
		"pool=gpu":                     {"w2"},
		"cluster=c3":                   nil,
	} {
		if got := names(v3.ListInstancesWithLabels(filter)); !slices.Equal(got, want) {
			t.Errorf("labels %q: %v, want %v", filter, got, want)
		}
	}
	if got := names(v3.ListInstancesWithManagerType(v3.ListInstancesManagerTypeInstancePool)); got != nil {
		t.Errorf("instances managed by an instance pool: %v, want none", got)
	}
	if got := names(v3.ListInstancesWithManagerID("6f8e2c7a-1234-4abc-8def-0123456789ab")); got != nil {
		t.Errorf("instances of a manager: %v, want none", got)
	}
	w1 := v.emu.Instances()[0]
	if got := names(v3.ListInstancesWithIPAddress(w1.PublicIPv4)); !slices.Equal(got, []string{"w1"}) {
		t.Errorf("instances with address %s: %v", w1.PublicIPv4, got)
	}
	resp, body := v.raw("GET", "/v2/instance?labels="+url.QueryEscape("cluster"), nil, true)
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantMessage(t, body, "Invalid value in labels")

	// List items are the document's list shape: no user data, disk size or
	// groups (GET of one instance has them).
	resp, body = v.raw("GET", "/v2/instance", nil, true)
	wantStatus(t, resp, body, http.StatusOK)
	for _, field := range []string{`"disk-size"`, `"anti-affinity-groups"`, `"user-data"`} {
		if strings.Contains(string(body), field) {
			t.Errorf("list answers %s", field)
		}
	}
}

func TestUpdateInstance(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	req := instanceReq("before")
	req.Labels = v3.Labels{"keep": "me"}
	_, id := v.create(c, req)

	// The SDK sends "labels": null when it has none: labels unchanged.
	op := v.op(c.UpdateInstance(v.ctx, id, v3.UpdateInstanceRequest{Name: "after"}))
	if op.Reference.Command != "update-instance" {
		t.Fatalf("reference %+v", op.Reference)
	}
	inst := v.getInstance(c, id)
	if inst.Name != "after" || inst.Labels["keep"] != "me" {
		t.Fatalf("after renaming: %q with labels %v", inst.Name, inst.Labels)
	}
	// Labels given replace them all.
	v.op(c.UpdateInstance(v.ctx, id, v3.UpdateInstanceRequest{Labels: v3.Labels{"new": "one"}}))
	if got := v.getInstance(c, id).Labels; len(got) != 1 || got["new"] != "one" {
		t.Fatalf("labels %v, want only new=one", got)
	}
	// Reset empties them.
	op = v.op(c.ResetInstanceField(v.ctx, id, v3.ResetInstanceFieldFieldLabels))
	if op.Reference.Command != "reset-instance-field" {
		t.Fatalf("reference %+v", op.Reference)
	}
	if got := v.getInstance(c, id).Labels; len(got) != 0 {
		t.Fatalf("labels after reset: %v", got)
	}
	resp, body := v.raw("DELETE", "/v2/instance/"+string(id)+"/name", nil, true)
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantMessage(t, body, "should be one of labels")
	// A value of the wrong JSON type is named by the API's field name.
	resp, body = v.raw("POST", "/v2/instance", map[string]any{"disk-size": "20"}, true)
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantMessage(t, body, "Invalid value in disk-size (description: `Instance disk size in GiB`)")

	// Public addresses follow the assignment; user data is replaced.
	v.op(c.UpdateInstance(v.ctx, id, v3.UpdateInstanceRequest{PublicIPAssignment: v3.PublicIPAssignmentDual, UserData: "aGVsbG8="}))
	inst = v.getInstance(c, id)
	if inst.Ipv6Address == "" || inst.UserData != "aGVsbG8=" {
		t.Fatalf("after update: IPv6 %q, user data %q", inst.Ipv6Address, inst.UserData)
	}
	v.op(c.UpdateInstance(v.ctx, id, v3.UpdateInstanceRequest{PublicIPAssignment: v3.PublicIPAssignmentNone}))
	if inst := v.getInstance(c, id); inst.PublicIP != nil || inst.Ipv6Address != "" {
		t.Fatalf("after none: %v, %q", inst.PublicIP, inst.Ipv6Address)
	}

	_, err := c.UpdateInstance(v.ctx, id, v3.UpdateInstanceRequest{Name: "in_valid"})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "Invalid value in name")
	_, err = c.UpdateInstance(v.ctx, "6f8e2c7a-1234-4abc-8def-0123456789ab", v3.UpdateInstanceRequest{Name: "x"})
	apiError(t, err, v3.ErrNotFound)
}

func TestScaleAndResizeInstance(t *testing.T) {
	t.Parallel()
	v := newEnv(t, emu.Config{})
	c := v.client
	_, id := v.create(c, instanceReq("grow"))

	// Both need a stopped instance.
	_, err := c.ScaleInstance(v.ctx, id, v3.ScaleInstanceRequest{InstanceType: &v3.InstanceType{ID: typeLarge}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "stop it before scaling")
	_, err = c.ResizeInstanceDisk(v.ctx, id, v3.ResizeInstanceDiskRequest{DiskSize: 50})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "stop it before resizing")

	v.op(c.StopInstance(v.ctx, id))
	v.op(c.ScaleInstance(v.ctx, id, v3.ScaleInstanceRequest{InstanceType: &v3.InstanceType{ID: typeLarge}}))
	v.op(c.ResizeInstanceDisk(v.ctx, id, v3.ResizeInstanceDiskRequest{DiskSize: 50}))
	inst := v.getInstance(c, id)
	if inst.InstanceType.ID != typeLarge || inst.DiskSize != 50 {
		t.Fatalf("after scaling: type %v, disk %d", inst.InstanceType.ID, inst.DiskSize)
	}
	info, _ := v.emu.Instance(string(id))
	if info.InstanceType != "standard.large" || info.CPUs != 4 || info.MemoryBytes != 8<<30 {
		t.Fatalf("introspection %+v", info)
	}
	// Between standard, cpu and memory families, yes; to GPUs, no; disks
	// only grow.
	v.op(c.ScaleInstance(v.ctx, id, v3.ScaleInstanceRequest{InstanceType: &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("memory.huge"))}}))
	_, err = c.ScaleInstance(v.ctx, id, v3.ScaleInstanceRequest{InstanceType: &v3.InstanceType{ID: v3.UUID(emu.InstanceTypeID("gpu2.small"))}})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "cannot be scaled to gpu2.small")
	_, err = c.ResizeInstanceDisk(v.ctx, id, v3.ResizeInstanceDiskRequest{DiskSize: 40})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "can only grow")
	_, err = c.ResizeInstanceDisk(v.ctx, id, v3.ResizeInstanceDiskRequest{DiskSize: 60000})
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "between 10 51200")

	// Start with a rescue profile, and refuse an unknown one.
	resp, body := v.raw("PUT", "/v2/instance/"+string(id)+":start", map[string]string{"rescue-profile": "floppy"}, true)
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantMessage(t, body, "rescue-profile")
	v.op(c.StartInstance(v.ctx, id, v3.StartInstanceRequest{RescueProfile: v3.StartInstanceRequestRescueProfileNetbootEfi}))
	// Rebooting a stopped instance is refused.
	v.op(c.StopInstance(v.ctx, id))
	_, err = c.RebootInstance(v.ctx, id)
	wantContains(t, apiError(t, err, v3.ErrBadRequest), "only a running instance can be rebooted")
}
