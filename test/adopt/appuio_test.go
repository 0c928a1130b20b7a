package adopt_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/appuio/machine-api-provider/api/cloudscale/v1beta1"
	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/appuioswitch"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/gitops"
	"github.com/appuio/machine-api-provider/test/ownaudit"
)

// A cluster as appuio/machine-api-provider-cloudscale v0.4.0 and its
// Commodore component (v0.3.1) leave it. Every fact is read from their code
// (github.com/appuio/machine-api-provider-cloudscale, tag v0.4.0;
// github.com/appuio/component-machine-api-provider-cloudscale, tag v0.3.1),
// cited where used; none of their code runs here.
//
// The cluster is a fleet cluster as appuio's Terraform module built it: its
// Machines and MachineSets (the module's outputs) carry the module's
// cluster_id, the Project Syn ID, which appuio's provider tagged their
// servers with; the installer's infrastructureName is that ID plus five
// random characters (appuio/terraform-openshift4-cloudscale,
// modules/node-group/outputs.tf, variables.tf; the installer's
// pkg/asset/installconfig/clusterid.go).
const (
	apClusterID = "c-cold-bush-7254"
	apInfraName = "c-cold-bush-7254-6xk2p"
	apDomain    = "c1.example.com"
	// apToken is the component's secret cloudscale-rw-token.
	apToken = "appuio-rw-token"
	// apCA is the CA the component's user data secret holds, copied at
	// install time (pkg/machine/userdata/userdata-secret-from-maintfjson.sh).
	apCA = "-----BEGIN CERTIFICATE-----\nMIIBcopiedAtInstallTime\n-----END CERTIFICATE-----\n"
)

// componentLabels are the component's commonLabels (component/main.jsonnet),
// and Argo CD's tracking label of its Application (argocd.argoproj.io/instance,
// the Application's name), as Argo CD sets it on what it applies.
var componentLabels = map[string]string{
	"app.kubernetes.io/name": "machine-api-provider", appuioswitch.ComponentInstanceLabel: appuioswitch.ComponentInstance,
	"app.kubernetes.io/part-of": "syn", "app.kubernetes.io/managed-by": "commodore",
	argoInstanceLabel: appuioswitch.ComponentInstance,
}

// Argo CD's resource tracking: the label (the default tracking method) and
// the annotation (tracking method annotation, argoTracking).
const (
	argoInstanceLabel = "argocd.argoproj.io/instance"
)

// apTemplate is a user data template as appuio's v0.4.0 ones are written
// (pkg/machine/userdata/userdata.jsonnet does the same, in its own words):
// the URL and CA of the machine-config-operator's
// <machineset>-user-data-managed Secret, which the spec's
// userDataSecretSelector puts into context.secrets, else its own copies;
// the Ignition version its own, older boot images read; the hostname the
// Machine's name.
const apTemplate = `local ctx = std.extVar('context');
local set = std.get(std.get(ctx.machine.metadata, 'labels', {}), 'machine.openshift.io/cluster-api-machineset');
local managed = if set == null || std.get(ctx, 'secrets') == null then [] else
  std.filter(function(s) s.metadata.name == set + '-user-data-managed', ctx.secrets);
local pointer = if std.length(managed) == 1 then std.parseJson(std.decodeUTF8(std.base64DecodeBytes(managed[0].data.userData))) else null;
{
  ignition: {
    version: '3.1.0',
    config: { merge: if pointer != null then [{ source: s.source } for s in pointer.ignition.config.merge]
                     else [{ source: 'https://%s:22623/config/worker' % ctx.data.ignitionHost }] },
    security: { tls: { certificateAuthorities: if pointer != null then [{ source: c.source } for c in pointer.ignition.security.tls.certificateAuthorities]
                       else [{ source: 'data:text/plain;charset=utf-8;base64,' + std.base64(ctx.data.ignitionCA) }] } },
  },
  storage: { files: [{ filesystem: 'root', path: '/etc/hostname', mode: 420, contents: { source: 'data:,' + ctx.machine.metadata.name } }] },
}
`

// apWorld is the cluster and the account as appuio's provider left them.
type apWorld struct {
	c        *sdk.Client
	network  string
	group    string            // the cluster's anti-affinity group, key worker
	foreign  []string          // another cluster's group of the same key, and an empty one
	servers  map[string]string // Machine -> server UUID
	machines map[string]types.UID
	nodes    map[string]types.UID
	secrets  map[string]map[string][]byte
}

// apSpec is a provider spec as appuio's MachineSets have it
// (config/samples/machineset-cloudscale-known-working.yml): no apiVersion
// nor kind, the empty metadata its encoder writes, the component's Secrets,
// and the selector that puts the machine-config-operator's managed Secrets
// into the template's context.
func apSpec(network string, antiAffinity bool) *runtime.RawExtension {
	s := map[string]any{
		"metadata": map[string]any{"creationTimestamp": nil},
		"zone":     "rma1", "baseDomain": apDomain, "flavor": "flex-16-4", "image": "custom:rhcos-4.19", "rootVolumeSizeGB": 100,
		"rootVolumeTags": map[string]string{"backup": "none"}, "tags": map[string]string{"team": "platform"},
		"interfaces":             []any{map[string]any{"type": "Private", "networkUUID": network}},
		"userDataSecret":         map[string]string{"name": "cloudscale-user-data"},
		"tokenSecret":            map[string]string{"name": "cloudscale-rw-token"},
		"userDataSecretSelector": map[string]any{"matchLabels": map[string]string{actuator.ManagedUserDataLabel: ""}},
	}
	if antiAffinity {
		s["antiAffinityKey"] = "worker"
	}
	b, _ := json.Marshal(s)
	return &runtime.RawExtension{Raw: b}
}

// apServerTags are the tags appuio's provider gives a server and keeps on
// it (pkg/machine/actuator.go, buildServerTags; Update writes them back
// when they differ).
func apServerTags(machine string) map[string]string {
	return map[string]string{"team": "platform", v1beta1.TagMachineName: machine, v1beta1.TagClusterID: apClusterID}
}

func buildAppuio(t *testing.T, e *env) *apWorld {
	t.Helper()
	ctx := e.ctx
	c := sdk.NewClient(http.DefaultClient)
	c.BaseURL, _ = url.Parse(e.APIURL)
	c.AuthToken = apToken
	w := &apWorld{c: c, servers: map[string]string{}, machines: map[string]types.UID{}, nodes: map[string]types.UID{}, secrets: map[string]map[string][]byte{}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	no := false
	net, err := c.Networks.Create(ctx, &sdk.NetworkCreateRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"}, Name: "privnet", AutoCreateIPV4Subnet: &no})
	must(err)
	sub, err := c.Subnets.Create(ctx, &sdk.SubnetCreateRequest{Network: net.UUID, CIDR: "172.18.200.0/24", GatewayAddress: "172.18.200.1"})
	must(err)
	w.network = net.UUID

	// Its anti-affinity groups: named and tagged with the key only
	// (ensureAntiAffinityServerGroupForKey), shared by the account's
	// clusters: one of this cluster, one holding another cluster's server,
	// one left empty.
	group := func() string {
		g, err := c.ServerGroups.Create(ctx, &sdk.ServerGroupRequest{ZonalResourceRequest: sdk.ZonalResourceRequest{Zone: "rma1"},
			TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: &sdk.TagMap{v1beta1.TagAntiAffinityKey: "worker"}}, Name: "worker", Type: "anti-affinity"})
		must(err)
		return g.UUID
	}
	w.group = group()
	other, empty := group(), group()
	w.foreign = []string{other, empty}
	_, err = c.Servers.Create(ctx, &sdk.ServerRequest{Name: "worker-zzzzz.other.example.com", Zone: "rma1", Flavor: "flex-16-4", Image: "custom:rhcos-4.19",
		VolumeSizeGB: 100, ServerGroups: []string{other}, SSHKeys: []string{},
		TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: &sdk.TagMap{v1beta1.TagMachineName: "worker-zzzzz", v1beta1.TagClusterID: "c-other-9876"}}})
	must(err)

	// The component's Secrets (tests/defaults.yml, golden 00_secrets.yaml),
	// kept by its Argo CD Application, and the machine-config-operator's
	// managed one.
	withArgoCD(e)
	w.secrets["cloudscale-rw-token"] = map[string][]byte{"token": []byte(apToken)}
	w.secrets["cloudscale-user-data"] = map[string][]byte{"ignitionHost": []byte("api-int." + apDomain), "ignitionCA": []byte(apCA), "userData": []byte(apTemplate)}
	for name, data := range w.secrets {
		must(e.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo.Namespace, Labels: componentLabels, Annotations: argoTracking("Secret", name)},
			Type: corev1.SecretTypeOpaque, Data: data}))
	}
	e.rotateCA("worker", "api-int."+apDomain+":22623")

	// Its MachineSets and Machines; the servers as its actuator made them
	// (Create: named <machine>.<baseDomain>, its tags, the group; the
	// volume tagged with rootVolumeTags only), Nodes named after the
	// Machine (its template writes /etc/hostname), linked.
	sets := []struct {
		name     string
		machines []string
		group    bool
	}{{"worker", []string{"worker-7ws9q", "worker-b2k4d"}, true}, {"infra", []string{"infra-x5n2m"}, false}}
	for _, set := range sets {
		for _, name := range set.machines {
			req := &sdk.ServerRequest{Name: name + "." + apDomain, Zone: "rma1", Flavor: "flex-16-4", Image: "custom:rhcos-4.19", VolumeSizeGB: 100,
				Interfaces: &[]sdk.InterfaceRequest{{Network: net.UUID, Addresses: &[]sdk.AddressRequest{{Subnet: sub.UUID}}}}, SSHKeys: []string{},
				UserData: pointerIgnition(apCA), TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: ptr.To(sdk.TagMap(apServerTags(name)))}}
			if set.group {
				req.ServerGroups = []string{w.group}
			}
			s, err := c.Servers.Create(ctx, req)
			must(err)
			must(c.Volumes.Update(ctx, s.Volumes[0].UUID, &sdk.VolumeUpdateRequest{TaggedResourceRequest: sdk.TaggedResourceRequest{Tags: &sdk.TagMap{"backup": "none"}}}))
			w.servers[name] = s.UUID
			ip := s.Interfaces[0].Addresses[0].Address
			e.node(name, "cloudscale://"+s.UUID, []string{"worker", set.name}, ip)
			labels := map[string]string{"machine.openshift.io/cluster-api-cluster": apClusterID, "machine.openshift.io/cluster-api-machineset": set.name,
				"machine.openshift.io/cluster-api-machine-role": set.name, "machine.openshift.io/cluster-api-machine-type": set.name}
			m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo.Namespace, Labels: labels,
				Finalizers: []string{machinev1beta1.MachineFinalizer}}}
			m.Spec.ProviderSpec.Value = apSpec(net.UUID, set.group)
			m.Spec.ProviderID = ptr.To("cloudscale://" + s.UUID)
			must(e.Client.Create(ctx, m))
			// Its status as appuio's actuator writes it
			// (updateMachineFromCloudscaleServer) and the machine
			// controller's phase; nodelink may write too meanwhile.
			base := m.DeepCopy()
			m.Status.Phase = ptr.To(machinev1beta1.PhaseRunning)
			m.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: s.Name}, {Type: corev1.NodeInternalDNS, Address: s.Name},
				{Type: corev1.NodeInternalDNS, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
			m.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","instanceId":%q,"status":"running"}`, s.UUID))}
			must(e.Client.Status().Patch(ctx, m, client.MergeFrom(base)))
			w.machines[name] = m.UID
		}
		// The MachineSet comes once the machine-api controllers' cache
		// holds its Machines, which nodelink linking them to their Nodes
		// shows (the MachineSet controller shares that cache): else it
		// would make Machines of its own for replicas it does not see.
		e.eventually(time.Minute, "nodelink to link the Machines of "+set.name, func() (bool, string) {
			for _, name := range set.machines {
				if e.machine(name).Status.NodeRef == nil {
					return false, name + " has no nodeRef"
				}
			}
			return true, ""
		})
		n := int32(len(set.machines))
		ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: set.name, Namespace: demo.Namespace,
			Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": apClusterID}}}
		ms.Spec.Replicas = &n
		ms.Spec.DeletePolicy = string(machinev1beta1.NewestMachineSetDeletePolicy)
		sel := map[string]string{"machine.openshift.io/cluster-api-cluster": apClusterID, "machine.openshift.io/cluster-api-machineset": set.name}
		ms.Spec.Selector.MatchLabels = sel
		ms.Spec.Template.ObjectMeta.Labels = map[string]string{"machine.openshift.io/cluster-api-cluster": apClusterID, "machine.openshift.io/cluster-api-machineset": set.name,
			"machine.openshift.io/cluster-api-machine-role": set.name, "machine.openshift.io/cluster-api-machine-type": set.name}
		ms.Spec.Template.Spec.ProviderSpec.Value = apSpec(net.UUID, set.group)
		must(e.Client.Create(ctx, ms))
	}

	// Its Deployments, service account and binding: the component's
	// (component/main.jsonnet), and the controllers its manager applied,
	// owned by the operator's images ConfigMap
	// (controllers/machine_api_controllers_controller.go).
	images := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deployer.ImagesConfigMap, Namespace: demo.Namespace},
		Data: map[string]string{deployer.ImagesKey: `{"machineAPIOperator":"quay.io/openshift/mao@sha256:1111111111111111111111111111111111111111111111111111111111111111","kubeRBACProxy":"quay.io/openshift/krp@sha256:2222222222222222222222222222222222222222222222222222222222222222"}`}}
	must(e.Client.Create(ctx, images))
	must(e.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: appuioswitch.ManagerDeployment, Namespace: demo.Namespace, Labels: componentLabels}}))
	must(e.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: appuioswitch.ManagerDeployment, Labels: componentLabels},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: appuioswitch.ManagerDeployment, Namespace: demo.Namespace}}}))
	must(e.Client.Create(ctx, apDeployment(appuioswitch.ManagerDeployment, componentLabels,
		map[string]string{"app.kubernetes.io/name": "machine-api-provider", "app.kubernetes.io/instance": appuioswitch.ComponentInstance})))
	apControllers(t, e)

	// Its leases, held: the machine controller's and the manager's
	// (main.go), and the operator's controllers' in its Deployment
	// (--leader-elect-lease-duration=120s).
	for name, holder := range map[string]string{
		appuioswitch.ManagerLease:                 appuioswitch.ManagerDeployment + "-6d8f7b9c4-x2x7q_4c1f",
		appuioswitch.ControllersManagerLease:      appuioswitch.ManagerDeployment + "-6d8f7b9c4-x2x7q_9e2a",
		"cluster-api-provider-machineset-leader":  appuioswitch.ControllersDeployment + "-5b7c9d8f6-k4j2p_77aa",
		"cluster-api-provider-nodelink-leader":    appuioswitch.ControllersDeployment + "-5b7c9d8f6-k4j2p_88bb",
		"cluster-api-provider-healthcheck-leader": appuioswitch.ControllersDeployment + "-5b7c9d8f6-k4j2p_99cc",
	} {
		d := int32(15)
		if strings.HasPrefix(name, "cluster-api") {
			d = 120
		}
		now := metav1.NewMicroTime(time.Now())
		must(e.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo.Namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: &d, AcquireTime: &now, RenewTime: &now}}))
	}

	e.eventually(time.Minute, "the servers to run, every Machine on its Node", func() (bool, string) {
		for name, id := range w.servers {
			s, err := c.Servers.Get(ctx, id)
			if err != nil || s.Status != "running" {
				return false, fmt.Sprintf("%s: %v %v", name, err, s)
			}
			m := e.machine(name)
			if m.Status.NodeRef == nil {
				return false, name + " has no nodeRef"
			}
		}
		return true, ""
	})
	for name := range w.servers {
		var n corev1.Node
		must(e.Client.Get(ctx, client.ObjectKey{Name: name}, &n))
		w.nodes[name] = n.UID
	}
	e.machineSetOwns("worker", "worker-7ws9q", "worker-b2k4d")
	e.machineSetOwns("infra", "infra-x5n2m")
	// The switch hands the group of the cluster's servers over to the
	// provider (tags it): the one write to what is not yet the cluster's.
	e.allow(ownaudit.Exception{Reason: "switch-from-appuio hands the group of the cluster's servers over", Caller: harness.CallerToken(apToken), Objects: []string{w.group}})
	e.beginAudit()
	return w
}

// pointerIgnition is the user data appuio's template rendered for a node.
func pointerIgnition(ca string) string {
	return `{"ignition":{"config":{"merge":[{"source":"https://api-int.` + apDomain + `:22623/config/worker"}]},"security":{"tls":{"certificateAuthorities":[{"source":"data:text/plain;charset=utf-8;base64,` +
		base64Std(ca) + `"}]}},"version":"3.1.0"}}`
}

// apDeployment is a Deployment with one container, selecting its pods by
// sel.
func apDeployment(name string, labels, sel map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{
					Containers:   []corev1.Container{{Name: "manager", Image: "ghcr.io/appuio/machine-api-provider-cloudscale:v0.4.0"}},
					NodeSelector: map[string]string{"node-role.kubernetes.io/master": ""},
				},
			},
		},
	}
}

// apControllers applies appuio-machine-api-controllers as appuio's manager
// does: owned by the images ConfigMap (SetControllerReference), selecting
// the operator's pod labels (controllers/machine_api_controllers_deployment.jsonnet).
func apControllers(t *testing.T, e *env) {
	t.Helper()
	var images corev1.ConfigMap
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: deployer.ImagesConfigMap}, &images); err != nil {
		t.Fatal(err)
	}
	l := map[string]string{"api": "clusterapi", "k8s-app": "controller"}
	d := apDeployment(appuioswitch.ControllersDeployment, l, l)
	if err := controllerutil.SetControllerReference(&images, d, e.Client.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(e.ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// appuioManager plays the part of appuio's manager process while its
// component's Deployment exists (the process is not run: the module proxy
// does not serve it, and its code is read only): it renews its two leases
// and applies appuio-machine-api-controllers again when it is gone and no
// machine-api-controllers exists (machine_api_controllers_controller.go,
// Reconcile). When the Deployment goes, the process ends: the manager
// lease of --target machine-api-controllers-manager is released
// (LeaderElectionReleaseOnCancel: true), the machine controller's is not
// (main.go, runManager).
func appuioManager(t *testing.T, e *env) (stopped <-chan struct{}) {
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(e.ctx)
	t.Cleanup(cancel)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: appuioswitch.ManagerDeployment}, &appsv1.Deployment{})
			if apierrors.IsNotFound(err) {
				release(ctx, e, appuioswitch.ControllersManagerLease)
				return
			}
			for _, name := range []string{appuioswitch.ManagerLease, appuioswitch.ControllersManagerLease} {
				renew(ctx, e, name)
			}
			errOp := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: deployer.OperatorDeploymentName}, &appsv1.Deployment{})
			errOurs := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: appuioswitch.ControllersDeployment}, &appsv1.Deployment{})
			if apierrors.IsNotFound(errOp) && apierrors.IsNotFound(errOurs) {
				apControllers(t, e)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return done
}

func renew(ctx context.Context, e *env, name string) {
	var l coordinationv1.Lease
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &l); err != nil {
		return
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	_ = e.Client.Update(ctx, &l)
}

func release(ctx context.Context, e *env, name string) {
	var l coordinationv1.Lease
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, &l); err != nil {
		return
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To(""), ptr.To[int32](1)
	_ = e.Client.Update(ctx, &l)
}

// removeComponent does what Argo CD does when the component leaves the
// cluster's catalog: it deletes everything it tracks (its label).
func removeComponent(t *testing.T, e *env) {
	t.Helper()
	sel := client.MatchingLabels{appuioswitch.ComponentInstanceLabel: appuioswitch.ComponentInstance}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}, &corev1.Secret{}} {
		if err := e.Client.DeleteAllOf(e.ctx, obj, client.InNamespace(demo.Namespace), sel); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Client.DeleteAllOf(e.ctx, &rbacv1.ClusterRoleBinding{}, sel); err != nil {
		t.Fatal(err)
	}
}

// docCommands are the commands of a section of docs/switch-from-appuio.md,
// in order: the lines of its sh blocks that run oc or the release's tool.
func docCommands(t *testing.T, section string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "switch-from-appuio.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "\n## "+section+"\n")
	if i < 0 {
		t.Fatalf("docs/switch-from-appuio.md has no section %q", section)
	}
	text = text[i+1:]
	if j := strings.Index(text[3:], "\n## "); j >= 0 {
		text = text[:j+3]
	}
	var out []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		for _, line := range strings.Split(block[1], "\n") {
			if strings.HasPrefix(line, "oc ") || strings.HasPrefix(line, "machine-api-provider ") {
				out = append(out, line)
			}
		}
	}
	return out
}

// step is a command of the docs and what it does here: the binary's
// commands run as they are (pkg/appuioswitch, with the options their
// flags give); oc's are done with the API, as oc does them.
type step struct {
	command string
	run     func()
}

// follow checks that the steps are the section's commands, in order, and
// runs them.
func follow(t *testing.T, section string, steps []step) {
	t.Helper()
	want := make([]string, len(steps))
	for i, s := range steps {
		want[i] = s.command
	}
	if got := docCommands(t, section); !slices.Equal(got, want) {
		t.Fatalf("docs/switch-from-appuio.md, %q: the commands are\n%s\nthe test follows\n%s", section, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range steps {
		t.Logf("$ %s", s.command)
		s.run()
	}
}

// assertNoServerCalls checks that, of the emulator's requests since the
// last reset, none created, deleted, stopped, started or rebooted a
// server, and logs each count, zeros included.
func assertNoServerCalls(t *testing.T, e *env, when string) {
	t.Helper()
	var counts []string
	for _, route := range []string{"POST /v1/servers", "DELETE /v1/servers/{uuid}", "POST /v1/servers/{uuid}/stop", "POST /v1/servers/{uuid}/start", "POST /v1/servers/{uuid}/reboot"} {
		n := e.Harness().Count(route)
		counts = append(counts, fmt.Sprintf("%s: %d", route, n))
		if n > 0 {
			t.Errorf("%s: %d calls %s, want none", when, n, route)
		}
	}
	t.Logf("server calls %s: %s", when, strings.Join(counts, ", "))
}

// TestSwitchFromAppuio switches a cluster that runs appuio's provider to
// this one by the steps of docs/switch-from-appuio.md, command for command,
// and back by the same page: no server created, deleted, stopped or
// rebooted; every Machine keeps its server and Node; appuio's controllers
// gone and not coming back, their leases released, their Secrets carried
// over, their server groups of the cluster handed over (another cluster's
// left alone); then the MachineSets scale like any other, new servers
// getting the CA the machine-config-operator rotated. After the way back,
// every server is where appuio's provider looks for it. Around it, as on a
// fleet cluster: Argo CD keeps the component's Secrets, which the plan
// says; a MachineHealthCheck and a MachineAutoscaler (the real
// cluster-autoscaler-operator's) act on the MachineSets, and the switch
// pauses both from --prepare until --apply is done.
func TestSwitchFromAppuio(t *testing.T) {
	t.Parallel()
	e := start(t, demo.Cloudscale, apInfraName, func(o *demo.Options) {
		o.WithoutProvider, o.Autoscaler = true, true
		o.ScaleDownUnneeded, o.ScaleDownDelayAfterAdd = 10*time.Second, 10*time.Second
	})
	w := buildAppuio(t, e)
	// The autoscaler and a MachineHealthCheck run throughout (fleet_test.go).
	for name := range w.servers {
		e.withCapacity(name)
	}
	e.fleetAutomation(autoscaledSet, autoscaledMin, autoscaledMax)
	e.assertAutoscaled(true)
	appuioStopped := appuioManager(t, e)
	var out bytes.Buffer
	sw := appuioswitch.New(e.kube, cscloud.New(cscloud.Options{BaseURL: e.APIURL}),
		appuioswitch.Options{Namespace: demo.Namespace, Wait: time.Minute, Poll: 250 * time.Millisecond, Out: &out, Log: e.log})
	run := func(what string, f func(context.Context) error) error {
		out.Reset()
		err := f(e.ctx)
		t.Logf("%s:\n%s(error: %v)", what, out.String(), err)
		return err
	}
	mustRun := func(what string, f func(context.Context) error) {
		t.Helper()
		if err := run(what, f); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var stopDeployer, stopProvider func()
	statusOf := func() []metav1.Condition {
		conds, err := deployer.ReadConditions(e.ctx, e.Client, demo.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return conds
	}
	deployed := func() *metav1.Condition {
		for _, c := range statusOf() {
			if c.Type == deployer.ConditionDeployed {
				return &c
			}
		}
		return nil
	}
	exists := func(obj client.Object, name string) bool {
		err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: demo.Namespace, Name: name}, obj)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	e.Harness().ResetRequests()

	follow(t, "Switching", []step{
		{"machine-api-provider switch-from-appuio", func() {
			// The Syn ID, not declared yet: the one blocker, naming
			// the command that declares it (the doc's next one).
			s, err := sw.Plan(e.ctx)
			if err != nil || len(s.Blockers) != 1 || len(s.Machines) != 3 || len(s.MachineSets) != 2 || s.ClusterID != apClusterID ||
				!strings.Contains(s.Blockers[0], declareSyn) || !strings.Contains(s.Blockers[0], apInfraName) {
				t.Fatalf("plan: %v, %+v, want the blocker naming %q:\n%s", err, s, declareSyn, out.String())
			}
			if err := run("--prepare with the Syn ID undeclared", sw.Prepare); err == nil {
				t.Fatal("--prepare went on with the Syn ID undeclared")
			}
		}},
		{declareSyn, func() { e.declareLegacy(apClusterID) }},
		{"bin/machine-api-provider switch-from-appuio", func() {
			s, err := sw.Plan(e.ctx)
			if err != nil || len(s.Blockers) > 0 || s.ClusterID != apClusterID || !s.Identity.IsLegacy(apClusterID) {
				t.Fatalf("plan: %v, %+v:\n%s", err, s, out.String())
			}
			assertPlanSaysGitOps(e, out.String())
		}},
		{`oc -n openshift-machine-api create secret generic cloudscale-token --from-literal=token="$(oc -n openshift-machine-api get secret cloudscale-rw-token -o jsonpath='{.data.token}' | base64 -d)"`, func() {
			if err := e.Client.Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudscale-token", Namespace: demo.Namespace}, Data: map[string][]byte{"token": w.secrets["cloudscale-rw-token"]["token"]}}); err != nil {
				t.Fatal(err)
			}
		}},
		{`oc apply -k "https://github.com/appuio/machine-api-provider//config/overlays/cloudscale?ref=${VERSION}"`, func() {
			// The deployer, as the overlay runs it (with leader
			// election); the pods of what it deploys run nowhere here, so
			// the provider's manager stands in for its Deployment once it
			// is applied.
			mgr, err := deployer.NewManager(e.Cluster.Config, deployer.ManagerOptions{
				Options:            deployer.Options{Namespace: demo.Namespace, ProviderImage: "ghcr.io/appuio/machine-api-provider@sha256:3333333333333333333333333333333333333333333333333333333333333333"},
				MetricsBindAddress: "0", HealthProbeBindAddress: "0", LeaderElection: true, AllowManyPerProcess: true, Log: e.log.WithName("deployer"),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = mgr.Start(ctx) }()
			stopDeployer = func() { cancel(); <-done }
			t.Cleanup(stopDeployer)
		}},
		{`oc -n openshift-machine-api get configmap machine-api-provider-deployer-status -o jsonpath='{.data.conditions}'`, func() {
			e.eventually(time.Minute, "the deployer to stand back", func() (bool, string) {
				c := deployed()
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == deployer.ReasonAppuioProviderPresent, fmt.Sprint(c)
			})
		}},
		{"machine-api-provider switch-from-appuio --prepare", func() {
			mustRun("--prepare", sw.Prepare)
			// Nothing acts on the Machines until --apply is done.
			e.assertHealthCheckPaused(true)
			e.assertAutoscaled(false)
			// Too early for the switch: appuio's provider still runs.
			if err := run("--apply before the component is gone", sw.Apply); err == nil || !strings.Contains(err.Error(), "remove its component") {
				t.Fatalf("--apply while appuio's provider runs: %v, want a refusal", err)
			}
			if !exists(&appsv1.Deployment{}, appuioswitch.ControllersDeployment) {
				t.Fatal("the refused --apply deleted appuio's controllers")
			}
		}},
		{"oc -n openshift-machine-api wait --for=delete deployment/appuio-machine-api-provider-cloudscale --timeout=10m", func() {
			// (step 4, in Commodore: the component leaves the catalog,
			// Argo CD deletes what it rendered.)
			removeComponent(t, e)
			e.eventually(time.Minute, "the component's Deployment to be gone", func() (bool, string) {
				return !exists(&appsv1.Deployment{}, appuioswitch.ManagerDeployment), ""
			})
			select {
			case <-appuioStopped:
			case <-time.After(time.Minute):
				t.Fatal("appuio's manager did not stop")
			}
			for name := range w.secrets {
				if exists(&corev1.Secret{}, name) {
					t.Errorf("removing the component left its secret %s (the test's Argo CD)", name)
				}
			}
			// Still nothing of ours runs: appuio's controllers are there.
			if exists(&appsv1.Deployment{}, deployer.DeploymentName("cloudscale")) {
				t.Fatal("the deployer deployed beside appuio-machine-api-controllers")
			}
		}},
		{"machine-api-provider switch-from-appuio --apply", func() {
			e.assertHealthCheckPaused(true)
			mustRun("--apply", sw.Apply)
			e.assertPauseDone("after --apply")
		}},
		{"oc -n openshift-machine-api rollout status deployment/machine-api-controllers-cloudscale", func() {
			e.eventually(time.Minute, "the deployer to deploy", func() (bool, string) {
				return exists(&appsv1.Deployment{}, deployer.DeploymentName("cloudscale")), fmt.Sprint(deployed())
			})
			// The manager it deploys owns the declared Syn ID; the
			// one the test starts in its place reads it as well.
			var d appsv1.Deployment
			exists(&d, deployer.DeploymentName("cloudscale"))
			if args := managerArgs(&d); !slices.Contains(args, "--legacy-cluster-ids="+apClusterID) {
				t.Fatalf("the deployer's manager args %v, want --legacy-cluster-ids=%s", args, apClusterID)
			}
			var err error
			if stopProvider, err = e.StartProvider(true); err != nil {
				t.Fatal(err)
			}
		}},
		{"oc -n openshift-machine-api get machines", func() {
			e.eventually(2*time.Minute, "the provider to take every Machine over", func() (bool, string) {
				for name := range w.servers {
					if c := specInSync(e.machine(name)); c == nil || c.Status != metav1.ConditionTrue {
						return false, fmt.Sprintf("%s: SpecInSync %v", name, c)
					}
				}
				return true, ""
			})
		}},
	})

	// 0 servers created, deleted, stopped or rebooted.
	assertNoServerCalls(t, e, "while switching")
	t.Logf("cloud writes while switching: %v", e.writes())
	// Every Machine keeps its server and Node.
	for name, id := range w.servers {
		m := e.assertAdopted(name, "cloudscale://"+id, name)
		if m.UID != w.machines[name] {
			t.Errorf("Machine %s was recreated", name)
		}
		var n corev1.Node
		if err := e.Client.Get(e.ctx, client.ObjectKey{Name: name}, &n); err != nil || n.UID != w.nodes[name] {
			t.Errorf("Node %s: %v (UID %s, was %s)", name, err, n.UID, w.nodes[name])
		}
	}
	// appuio's controllers are gone, and stay gone; their owner stays.
	time.Sleep(2 * time.Second)
	if exists(&appsv1.Deployment{}, appuioswitch.ControllersDeployment) || exists(&appsv1.Deployment{}, appuioswitch.ManagerDeployment) {
		t.Error("appuio's Deployments are back")
	}
	if !exists(&corev1.ConfigMap{}, deployer.ImagesConfigMap) {
		t.Error("the operator's images ConfigMap is gone")
	}
	// Their leases are released.
	for _, name := range []string{appuioswitch.ManagerLease, appuioswitch.ControllersManagerLease, "cluster-api-provider-machineset-leader", "cluster-api-provider-nodelink-leader", "cluster-api-provider-healthcheck-leader"} {
		var l coordinationv1.Lease
		if !exists(&l, name) || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "") {
			t.Errorf("lease %s: holder %v, want released", name, l.Spec.HolderIdentity)
		}
	}
	// Their Secrets are carried over, unchanged, out of Argo CD's hands:
	// neither its tracking label nor its annotation.
	for name, data := range w.secrets {
		var s corev1.Secret
		if !exists(&s, name) || !maps.EqualFunc(s.Data, data, bytes.Equal) || s.Labels[appuioswitch.ComponentInstanceLabel] != "" ||
			s.Labels[argoInstanceLabel] != "" || s.Annotations[gitops.ArgoTrackingID] != "" {
			t.Errorf("secret %s: %v, labels %v, annotations %v: want it back as it was, untracked", name, s.Data != nil, s.Labels, s.Annotations)
		}
	}
	// The cluster's group is handed over; the others are left alone.
	g, err := w.c.ServerGroups.Get(e.ctx, w.group)
	if err != nil || g.Tags[v1beta1.TagClusterID] != apClusterID || g.Tags[v1beta1.TagAntiAffinityKey] != "worker" || len(g.Servers) != 2 {
		t.Errorf("the cluster's group: %+v, %v: want it tagged as the cluster's, its 2 servers kept", g, err)
	}
	for _, id := range w.foreign {
		g, err := w.c.ServerGroups.Get(e.ctx, id)
		if err != nil || g.Tags[v1beta1.TagClusterID] != "" {
			t.Errorf("another cluster's or an empty group %s: %v, %v: want it left alone", id, g.Tags, err)
		}
	}
	// Again: nothing is left to do.
	e.Harness().ResetRequests()
	mustRun("--apply again", sw.Apply)
	if writes := e.writes(); len(writes) > 0 {
		t.Errorf("--apply again wrote to the cloud: %v", writes)
	}

	// The MachineSets scale like any other; the new server trusts the CA
	// the machine-config-operator rotated since (through appuio's template
	// and its selector), and goes into the handed-over group.
	e.autoscaledUpAndDown(w, "worker", 2, "api-int."+apDomain+":22623")
	if n := e.Harness().Count("POST /v1/server-groups"); n != 0 {
		t.Errorf("scaling made %d server groups, want the handed-over one reused", n)
	}
	if g, err := w.c.ServerGroups.Get(e.ctx, w.group); err != nil || len(g.Servers) != 2 {
		t.Errorf("the handed-over group after scaling: %v, %v", g, err)
	}
	// One of appuio's Machines, which carry the Syn ID, remediated by the
	// MachineHealthCheck, goes with its server; its replacement gets one
	// tagged with the Syn ID.
	e.remediated(w, "worker")
	e.eventually(time.Minute, "the MachineHealthCheck to count 2 of 2 Machines healthy", func() (bool, string) {
		h, x := e.mhcHealthy("worker")
		return h == 2 && x == 2, fmt.Sprintf("%d of %d", h, x)
	})
	e.accountFor(w)

	// And back.
	e.Harness().ResetRequests()
	follow(t, "Back to appuio's provider", []step{
		{`oc delete -k "https://github.com/appuio/machine-api-provider//config/overlays/cloudscale?ref=${VERSION}"`, func() {
			stopDeployer()
		}},
		{"oc -n openshift-machine-api delete deployment machine-api-controllers-cloudscale --cascade=foreground", func() {
			if err := e.Client.Delete(e.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deployer.DeploymentName("cloudscale"), Namespace: demo.Namespace}},
				client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
				t.Fatal(err)
			}
			// oc delete waits until it is gone (--wait).
			e.eventually(time.Minute, "the controllers' Deployment to be gone", func() (bool, string) {
				return !exists(&appsv1.Deployment{}, deployer.DeploymentName("cloudscale")), ""
			})
			stopProvider()
		}},
		{"machine-api-provider switch-from-appuio --rollback", func() {
			mustRun("--rollback", sw.Rollback)
		}},
	})
	e.assertPauseDone("after --rollback")
	assertNoServerCalls(t, e, "on the way back")
	t.Logf("cloud writes on the way back: %v", e.writes())
	for _, name := range []string{"cloudscale-machine-api-provider", "machine-api-provider-deployer"} {
		var l coordinationv1.Lease
		if exists(&l, name) && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			t.Errorf("lease %s still held by %s", name, *l.Spec.HolderIdentity)
		}
	}
	// Every Machine's server is where appuio's provider looks for it
	// (getServer: the name tag, then the cluster's), with exactly the
	// tags its Update keeps (no write), in a group its placement finds by
	// the key; its Secrets are there.
	var machines machinev1beta1.MachineList
	if err := e.Client.List(e.ctx, &machines, client.InNamespace(demo.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		list, err := w.c.Servers.List(e.ctx, sdk.WithTagFilter(sdk.TagMap{v1beta1.TagMachineName: m.Name}))
		if err != nil {
			t.Fatal(err)
		}
		var found []sdk.Server
		for _, s := range list {
			if s.Tags[v1beta1.TagClusterID] == m.Labels["machine.openshift.io/cluster-api-cluster"] {
				found = append(found, s)
			}
		}
		if len(found) != 1 || m.Spec.ProviderID == nil || *m.Spec.ProviderID != "cloudscale://"+found[0].UUID {
			t.Errorf("Machine %s: appuio's lookup finds %d servers, want its own", m.Name, len(found))
			continue
		}
		if !maps.Equal(map[string]string(found[0].Tags), apServerTags(m.Name)) {
			t.Errorf("server of %s: tags %v, want appuio's %v", m.Name, found[0].Tags, apServerTags(m.Name))
		}
		// The root volume keeps rootVolumeTags; this provider's identity
		// tags beside them are what appuio's Update replaces by exactly
		// rootVolumeTags (a tag write, nothing on the server). A server
		// this provider made may not be tagged yet (it tags a new
		// server's volume at a later sync, pkg/cloud/cloudscale sync.go):
		// appuio's Update tags it the same way.
		vol, err := w.c.Volumes.Get(e.ctx, found[0].Volumes[0].UUID)
		switch {
		case err == nil && len(vol.Tags) == 0 && !slices.Contains(slices.Collect(maps.Values(w.servers)), found[0].UUID):
			t.Logf("root volume of %s, a server this provider made, after the way back: not tagged yet (appuio's Update sets rootVolumeTags)", m.Name)
		case err != nil || vol.Tags["backup"] != "none":
			t.Errorf("root volume of %s: %v, %v: want its rootVolumeTags backup=none", m.Name, vol, err)
		default:
			t.Logf("root volume of %s after the way back: tags %v", m.Name, vol.Tags)
		}
		if m.Labels["machine.openshift.io/cluster-api-machineset"] == "worker" {
			inKeyed := false
			for _, ref := range found[0].ServerGroups {
				g, err := w.c.ServerGroups.Get(e.ctx, ref.UUID)
				inKeyed = inKeyed || err == nil && g.Tags[v1beta1.TagAntiAffinityKey] == "worker"
			}
			if !inKeyed {
				t.Errorf("server of %s is in no group tagged with its antiAffinityKey", m.Name)
			}
		}
	}
	for name, data := range w.secrets {
		var s corev1.Secret
		if !exists(&s, name) || !maps.EqualFunc(s.Data, data, bytes.Equal) {
			t.Errorf("secret %s is not as appuio's Machines need it", name)
		}
	}
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// declareSyn is the command that declares the Syn ID as the cluster's
// legacy cluster ID, which the switch's blocker names and the doc shows.
var declareSyn = clusterid.DeclareCommand(apClusterID)

// annotateInfrastructure sets an annotation of the Infrastructure named
// cluster, as oc annotate --overwrite does.
func annotateInfrastructure(t *testing.T, e *env, key, value string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)))
	if err := e.Client.Patch(e.ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: clusterid.InfrastructureName}}, patch); err != nil {
		t.Fatal(err)
	}
}

// declareLegacy declares a legacy cluster ID as the cluster admin does
// (the doc's oc annotate), and restarts the provider where it runs, as the
// deployer rolls the controllers with the new --legacy-cluster-ids.
func (e *env) declareLegacy(id string) {
	e.t.Helper()
	annotateInfrastructure(e.t, e, clusterid.LegacyAnnotation, id)
	e.declared = append(e.declared, id)
	if e.Options.WithoutProvider || !e.MachineAPIRunning() {
		return
	}
	e.StopMachineAPI()
	if err := e.StartMachineAPI(); err != nil {
		e.t.Fatal(err)
	}
}

// managerArgs are the arguments of the manager in the controllers'
// Deployment.
func managerArgs(d *appsv1.Deployment) []string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == deployer.MachineContainer {
			return c.Args
		}
	}
	return nil
}

// accountFor checks that every server carrying the cluster's Syn ID is one
// Machine's, the one it records, and every Machine has one: nothing
// leaked, nothing made twice; and another cluster's server and groups are
// as they were.
func (e *env) accountFor(w *apWorld) {
	e.t.Helper()
	var machines machinev1beta1.MachineList
	if err := e.Client.List(e.ctx, &machines, client.InNamespace(demo.Namespace)); err != nil {
		e.t.Fatal(err)
	}
	want := map[string]string{}
	for _, m := range machines.Items {
		if m.Spec.ProviderID == nil {
			e.t.Errorf("Machine %s records no server", m.Name)
			continue
		}
		want[strings.TrimPrefix(*m.Spec.ProviderID, "cloudscale://")] = m.Name
	}
	servers, err := w.c.Servers.List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	ours := 0
	for _, s := range servers {
		switch s.Tags[v1beta1.TagClusterID] {
		case apClusterID:
			ours++
			if want[s.UUID] == "" || want[s.UUID] != s.Tags[v1beta1.TagMachineName] {
				e.t.Errorf("server %s (%s), tagged %v, is no Machine's: leaked", s.UUID, s.Name, s.Tags)
			}
		case "c-other-9876":
			if s.Status != "running" || s.Tags[v1beta1.TagMachineName] != "worker-zzzzz" {
				e.t.Errorf("another cluster's server %s: %s, tags %v", s.Name, s.Status, s.Tags)
			}
		default:
			e.t.Errorf("server %s (%s) carries tags %v: neither the cluster's nor another's", s.UUID, s.Name, s.Tags)
		}
	}
	if ours != len(want) {
		e.t.Errorf("%d servers tagged as cluster %s's, %d Machines", ours, apClusterID, len(want))
	}
	e.t.Logf("every server accounted for: %d of cluster %s, each one Machine's", ours, apClusterID)
}
