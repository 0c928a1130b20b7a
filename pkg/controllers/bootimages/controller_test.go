package bootimages_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	bootimagesctl "github.com/appuio/machine-api-provider/pkg/controllers/bootimages"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

const (
	ns        = "openshift-machine-api"
	clusterID = "c-bootimg-1"
)

func init() {
	cscloud.ImportPoll = 20 * time.Millisecond
	exocloud.OperationPoll = 20 * time.Millisecond
}

// world is one cloud's emulator, a control plane and the controller.
type world struct {
	t      *testing.T
	ctx    context.Context
	c      client.Client
	name   string
	cloud  cloud.Cloud
	images cloud.ImageClient
	mirror *imagefetch.Server
	zones  [2]string
	// seeded is the image an installation imported by hand; seededThere
	// says whether it still is.
	seeded      string
	seededThere func() bool
	spec        func(zone, ref string) string
}

func cloudWorlds(t *testing.T) map[string]func(t *testing.T) *world {
	return map[string]func(t *testing.T) *world{
		"cloudscale": func(t *testing.T) *world {
			e, err := emucs.New(emucs.Config{})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(e)
			t.Cleanup(srv.Close)
			c := cscloud.New(cscloud.Options{BaseURL: srv.URL + "/", DefaultToken: "t"})
			return &world{name: "cloudscale", cloud: c, zones: [2]string{"rma1", "lpg1"}, seeded: "custom:rhcos-4.19",
				seededThere: func() bool { return slices.Contains(e.CustomImageSlugs(), "rhcos-4.19") },
				spec: func(zone, ref string) string {
					return fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":%q,"flavor":"flex-8-4","image":%q,"rootVolumeSizeGB":100,"interfaces":[{"type":"Public"}]}`, zone, ref)
				}}
		},
		"exoscale": func(t *testing.T) *world {
			acc := emuexo.DefaultAccount
			acc.Quotas = map[string]int64{"template": 50} // a template per image and zone
			e, err := emuexo.New(emuexo.Config{Accounts: []emuexo.Account{acc}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(e)
			t.Cleanup(srv.Close)
			c := exocloud.New(exocloud.Options{APIEndpoint: srv.URL + "/v2", DefaultAPIKey: emuexo.DefaultAPIKey, DefaultAPISecret: emuexo.DefaultAPISecret})
			return &world{name: "exoscale", cloud: c, zones: [2]string{"ch-gva-2", "de-fra-1"}, seeded: "rhcos-4.19",
				seededThere: func() bool { return e.TemplateID(emuexo.DefaultAccountName, "ch-gva-2", "rhcos-4.19") != "" },
				spec: func(zone, ref string) string {
					return fmt.Sprintf(`{"apiVersion":"machine.appuio.io/v1beta1","kind":"ExoscaleMachineProviderSpec","zone":%q,"instanceType":"standard.large","template":{"name":%q},"diskSize":50}`, zone, ref)
				}}
		},
	}
}

func start(t *testing.T, w *world, o bootimagesctl.Options) {
	cfg, scheme, acc := setup(t, w)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Client:     client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	o.Cloud, o.ClusterID, o.Namespace, o.Mirror, o.Log = w.cloud, clusterID, ns, w.mirror.URL, testr.New(t)
	if o.Interval == 0 {
		o.Interval = 200 * time.Millisecond
	}
	ctl, err := bootimagesctl.New(mgr.GetClient(), mgr.GetAPIReader(), acc, mgr.GetEventRecorderFor("boot-images"), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(ctl); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, mgr)
}

// setup starts a control plane with the namespaces, MachineConfiguration
// cluster and the mirror, and w's image client.
func setup(t *testing.T, w *world) (*rest.Config, *runtime.Scheme, *cloud.Accounts) {
	w.t, w.ctx = t, context.Background()
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), testenv.WithCRDs(testenv.MachineConfigurationCRD(t), testenv.ClusterVersionCRD(t)))
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	w.c, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{ns, bootimages.Namespace} {
		if err := w.c.Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.c.Create(w.ctx, bootimages.NewMachineConfiguration()); err != nil {
		t.Fatal(err)
	}
	w.mirror = imagefetch.NewServer("/rhcos", nil)
	t.Cleanup(w.mirror.Close)
	acc := cloud.NewAccounts(w.cloud, cloud.AccountOptions{})
	a, err := acc.Get("", *w.cloud.DefaultCredentials())
	if err != nil {
		t.Fatal(err)
	}
	w.images = a.Client.(cloud.ImageClient)
	return cfg, scheme, acc
}

// release publishes a fake release: its ConfigMap, its files in the mirror.
func (w *world) release(version string, rhcos map[string]string, broken map[string]bool) {
	w.t.Helper()
	cm, files, err := bootimages.FakeRelease{Version: version, RHCOS: rhcos}.Build("https://rhcos.example/art")
	if err != nil {
		w.t.Fatal(err)
	}
	served := map[string][]byte{}
	for p, b := range files {
		switch {
		case broken[p]: // served wrong: another file's contents
			served[p] = append(slices.Clone(b), "tampered"...)
		case broken[p+"!missing"]:
		default:
			served[p] = b
		}
	}
	w.mirror.Set(served)
	have := &corev1.ConfigMap{}
	err = w.c.Get(w.ctx, client.ObjectKeyFromObject(cm), have)
	switch {
	case apierrors.IsNotFound(err):
		err = w.c.Create(w.ctx, cm)
	case err == nil:
		have.Data = cm.Data
		err = w.c.Update(w.ctx, have)
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) machineSet(name, zone string, labels map[string]string, owned bool) {
	w.t.Helper()
	sel := map[string]string{"machine.openshift.io/cluster-api-machineset": name}
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": clusterID}},
		Spec: machinev1.MachineSetSpec{
			Replicas: ptr.To[int32](0), Selector: metav1.LabelSelector{MatchLabels: sel},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: sel},
				Spec: machinev1.MachineSpec{ProviderSpec: machinev1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(w.spec(zone, w.seeded))}}}},
		},
	}
	for k, v := range labels {
		ms.Labels[k] = v
	}
	if owned {
		ms.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Name: "workers", UID: "a1b2c3"}}
	}
	if err := w.c.Create(w.ctx, ms); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) get(name string) *machinev1.MachineSet {
	w.t.Helper()
	ms := &machinev1.MachineSet{}
	if err := w.c.Get(w.ctx, types.NamespacedName{Namespace: ns, Name: name}, ms); err != nil {
		w.t.Fatal(err)
	}
	return ms
}

func (w *world) ref(name string) string {
	w.t.Helper()
	ref, _, err := w.cloud.(cloud.ImageCloud).SpecImageRef(w.get(name).Spec.Template.Spec.ProviderSpec)
	if err != nil {
		w.t.Fatal(err)
	}
	return ref
}

func condition(ms *machinev1.MachineSet) *machinev1.Condition {
	for i := range ms.Status.Conditions {
		if ms.Status.Conditions[i].Type == bootimagesctl.ConditionType {
			return &ms.Status.Conditions[i]
		}
	}
	return nil
}

// eventually polls until ok, at most two minutes (imports download from
// the mirror in real time).
func (w *world) eventually(what string, ok func() (bool, string)) {
	w.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		var good bool
		if good, last = ok(); good {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.t.Fatalf("%s: not within 2 minutes (last: %s)", what, last)
}

func (w *world) waitCondition(name, reason string) *machinev1.Condition {
	w.t.Helper()
	var c *machinev1.Condition
	w.eventually(fmt.Sprintf("MachineSet %s condition %s", name, reason), func() (bool, string) {
		c = condition(w.get(name))
		if c == nil {
			return false, "none"
		}
		return c.Reason == reason, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
	return c
}

// events are the messages of the events of reason ("" for any, then with
// the reason) about MachineSet name.
func (w *world) events(name, reason string) []string {
	w.t.Helper()
	var l corev1.EventList
	if err := w.c.List(w.ctx, &l, client.InNamespace(ns)); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		switch {
		case e.InvolvedObject.Name != name:
		case reason == "":
			out = append(out, e.Reason+": "+e.Message)
		case e.Reason == reason:
			out = append(out, e.Message)
		}
	}
	return out
}

// waitEvents waits for an event of reason about MachineSet name and
// returns the messages of those there then: events are recorded
// asynchronously, after the condition they go with is written.
func (w *world) waitEvents(name, reason string) []string {
	w.t.Helper()
	var out []string
	w.eventually(fmt.Sprintf("an event %s about %s", reason, name), func() (bool, string) {
		out = w.events(name, reason)
		return len(out) > 0, fmt.Sprintf("events %q", w.events(name, ""))
	})
	return out
}

func (w *world) cloudImages() []cloud.BootImage {
	w.t.Helper()
	l, err := w.images.ListBootImages(w.ctx, clusterID)
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

// aPassEnds waits for a pass of the controller to end without error
// (machine_api_provider_boot_image_passes_total): one that was under way
// when it was called, or a later one.
func (w *world) aPassEnds() {
	w.t.Helper()
	labels := map[string]string{"cloud": w.cloud.Name(), "result": "ok"}
	n := testenv.Counter(w.t, "machine_api_provider_boot_image_passes_total", labels)
	w.eventually("a pass of the boot image controller", func() (bool, string) {
		m := testenv.Counter(w.t, "machine_api_provider_boot_image_passes_total", labels)
		return m > n, fmt.Sprintf("%v passes", m)
	})
}

func (w *world) skewRecord() operatorv1.BootImageSkewEnforcementConfig {
	w.t.Helper()
	mc := &operatorv1.MachineConfiguration{}
	if err := w.c.Get(w.ctx, types.NamespacedName{Name: "cluster"}, mc); err != nil {
		w.t.Fatal(err)
	}
	return mc.Spec.BootImageSkewEnforcement
}

// The whole life of the release's boot images on each cloud: imported into
// the zones the MachineSets use; the MachineSets that follow move to it
// (rhel-10 to rhel-10's), the others do not (and say why); the skew
// record waits for every MachineSet to boot a known image, then holds the
// oldest; an upgrade imports the next release, moves the followers and
// prunes what no one names any more after the grace, never the images the
// provider did not make; a checksum mismatch and a missing file leave the
// MachineSets on their image, with a condition and a warning.
func TestBootImagesFollowTheRelease(t *testing.T) {
	for name, mk := range cloudWorlds(t) {
		t.Run(name, func(t *testing.T) {
			w := mk(t)
			start(t, w, bootimagesctl.Options{RecordSkew: true, PruneAfter: time.Second, RetryAfter: time.Hour})
			// The MachineSets first, then the release: the first pass that
			// can import sees every zone. (One that saw fewer would import
			// again, once the first import ended, for all the zones under
			// the next name: two images, as a MachineSet in a new zone makes.)
			w.machineSet("follow", w.zones[0], map[string]string{bootimages.FollowLabel: "true"}, false)
			w.machineSet("rhel10", w.zones[1], map[string]string{bootimages.FollowLabel: "true", bootimages.LabelOSStream: "rhel-10"}, false)
			w.machineSet("stay", w.zones[1], nil, false)
			w.machineSet("argo", w.zones[0], map[string]string{bootimages.FollowLabel: "true"}, true)
			w.release("4.22.1", map[string]string{"rhel-9": "9.6.20260101-0", "rhel-10": "10.1.20260102-0"}, nil)

			a9 := bootimages.BootImageName("9.6.20260101-0", "rhel-9", "amd64", clusterID)
			a10 := bootimages.BootImageName("10.1.20260102-0", "rhel-10", "amd64", clusterID)
			w.waitCondition("follow", bootimagesctl.ReasonCurrent)
			w.waitCondition("rhel10", bootimagesctl.ReasonCurrent)
			if got := w.ref("follow"); !strings.Contains(got, a9) {
				t.Errorf("follow boots %q, want %s", got, a9)
			}
			if got := w.ref("rhel10"); !strings.Contains(got, a10) {
				t.Errorf("rhel10 boots %q, want %s", got, a10)
			}
			for _, n := range []string{"stay", "argo"} {
				if got := w.ref(n); got != w.seeded {
					t.Errorf("%s was moved to %q", n, got)
				}
				if c := w.waitCondition(n, bootimagesctl.ReasonNotFollowing); c.Status != corev1.ConditionFalse {
					t.Errorf("%s: %+v", n, c)
				}
			}
			if c := condition(w.get("argo")); !strings.Contains(c.Message, "owner (Application workers)") {
				t.Errorf("argo's condition does not say why: %s", c.Message)
			}
			if ev := w.waitEvents("follow", bootimagesctl.ReasonUpdated); len(ev) != 1 || !strings.Contains(ev[0], a9) {
				t.Errorf("follow's events %v", ev)
			}
			// rhel-9 into both zones (follow, stay, argo), rhel-10 into one.
			zones := map[string][]string{}
			for _, im := range w.cloudImages() {
				zones[im.Name] = append(zones[im.Name], im.Zones...)
				if im.Release != "4.22.1" || im.Arch != "amd64" {
					t.Errorf("image %+v", im)
				}
			}
			slices.Sort(zones[a9])
			if want := []string{w.zones[0], w.zones[1]}; !slices.Equal(zones[a9], sorted(want)) || !slices.Equal(zones[a10], []string{w.zones[1]}) {
				t.Errorf("images in zones %v", zones)
			}

			// Skew: stay boots an image the provider did not import. A pass
			// that saw it (it wrote stay's condition) has ended: it would
			// have recorded by now.
			w.aPassEnds()
			if rec := w.skewRecord(); rec.Mode != "" {
				t.Fatalf("skew recorded while a MachineSet boots an unknown image: %+v", rec)
			}
			for _, n := range []string{"stay", "argo"} {
				if err := w.c.Delete(w.ctx, w.get(n)); err != nil {
					t.Fatal(err)
				}
			}
			w.eventually("the skew record", func() (bool, string) {
				rec := w.skewRecord()
				return rec.Mode == operatorv1.BootImageSkewEnforcementConfigModeManual && rec.Manual.RHCOSVersion == "9.6.20260101-0", fmt.Sprintf("%+v", rec)
			})

			// An upgrade: the followers move, the old images go.
			b9 := bootimages.BootImageName("9.6.20260301-0", "rhel-9", "amd64", clusterID)
			w.release("4.22.2", map[string]string{"rhel-9": "9.6.20260301-0", "rhel-10": "10.1.20260302-0"}, nil)
			w.eventually("follow on the new image", func() (bool, string) { got := w.ref("follow"); return strings.Contains(got, b9), got })
			w.eventually("the old images pruned", func() (bool, string) {
				var names []string
				for _, im := range w.cloudImages() {
					names = append(names, im.Name)
				}
				return !slices.Contains(names, a9) && !slices.Contains(names, a10), strings.Join(names, ", ")
			})
			w.eventually("the skew record follows", func() (bool, string) {
				rec := w.skewRecord()
				return rec.Manual.RHCOSVersion == "9.6.20260301-0", fmt.Sprintf("%+v", rec)
			})

			// Failures: rhel-9's file does not match the stream, rhel-10's
			// is missing: both stay on their image, and say so.
			c9 := "/rhcos-9.6.20260501-0-openstack.x86_64.qcow2"
			c10 := "/rhcos-10.1.20260502-0-openstack.x86_64.qcow2"
			if name == "exoscale" {
				c9 = strings.Replace(c9, "openstack", "exoscale", 1)
				c10 = strings.Replace(c10, "openstack", "exoscale", 1)
			}
			before9, before10 := w.ref("follow"), w.ref("rhel10")
			w.release("4.22.3", map[string]string{"rhel-9": "9.6.20260501-0", "rhel-10": "10.1.20260502-0"}, map[string]bool{c9: true, c10 + "!missing": true})
			c := w.waitCondition("follow", cloud.ReasonChecksumMismatch)
			if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "keeps booting "+before9) {
				t.Errorf("follow's condition %+v", c)
			}
			w.waitCondition("rhel10", cloud.ReasonImportFailed)
			if w.ref("follow") != before9 || w.ref("rhel10") != before10 {
				t.Errorf("MachineSets moved after failed imports: %s, %s", w.ref("follow"), w.ref("rhel10"))
			}
			w.waitEvents("follow", cloud.ReasonChecksumMismatch)
			if ev := w.waitEvents("rhel10", cloud.ReasonImportFailed); !strings.Contains(ev[0], "404") {
				t.Errorf("rhel10's ImportFailed events %v", ev)
			}
			for _, im := range w.cloudImages() {
				if strings.Contains(im.Name, "20260501") {
					t.Errorf("the mismatching image stayed: %+v", im)
				}
			}
			// No MachineSet names the installation's image any more: it
			// is not the provider's, and stays.
			if !w.seededThere() {
				t.Error("the image imported by hand was deleted")
			}
		})
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

// A cluster installed before 4.13 without a skew record is held back, and
// the message gives the command that records the boot image; a record, or
// a later install, is not.
func TestHeldBack(t *testing.T) {
	cfg, _ := testenv.Start(t, testenv.WithCRDs(testenv.MachineConfigurationCRD(t), testenv.ClusterVersionCRD(t)))
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"}, Spec: configv1.ClusterVersionSpec{ClusterID: "5f2b6c4e-1d7a-4c1e-9a57-6f1c2d3e4f50"}}
	if err := c.Create(ctx, cv); err != nil {
		t.Fatal(err)
	}
	history := func(versions ...string) {
		t.Helper()
		now := metav1.Now()
		cv.Status = configv1.ClusterVersionStatus{Desired: configv1.Release{Version: versions[0]}, VersionHash: "x"}
		for _, v := range versions {
			cv.Status.History = append(cv.Status.History, configv1.UpdateHistory{State: configv1.CompletedUpdate, Version: v, StartedTime: now, CompletionTime: &now, Image: "quay.io/x:" + v})
		}
		if err := c.Status().Update(ctx, cv); err != nil {
			t.Fatal(err)
		}
	}
	history("4.21.5", "4.16.3", "4.12.9")
	// no MachineConfiguration at all: held back (the MCO creates one)
	msg, err := bootimages.HeldBack(ctx, c, "")
	if err != nil || !strings.Contains(msg, "installed with OpenShift 4.12.9") || !strings.Contains(msg, "oc patch machineconfiguration cluster --type merge") {
		t.Fatalf("installed with 4.12: %q, %v", msg, err)
	}
	if err := c.Create(ctx, bootimages.NewMachineConfiguration()); err != nil {
		t.Fatal(err)
	}
	msg, err = bootimages.HeldBack(ctx, c, "9.6.20250523-0")
	if err != nil || !strings.Contains(msg, `"rhcosVersion":"9.6.20250523-0"`) {
		t.Fatalf("with the oldest known: %q, %v", msg, err)
	}
	// the command it prints is one the API takes, and clears it
	mc := bootimages.NewMachineConfiguration()
	if err := c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, bootimages.RecordPatch("9.6.20250523-0"))); err != nil {
		t.Fatalf("the printed patch: %v", err)
	}
	if msg, err := bootimages.HeldBack(ctx, c, ""); err != nil || msg != "" {
		t.Fatalf("with a record: %q, %v", msg, err)
	}
	history("4.21.5", "4.13.0")
	if err := c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"bootImageSkewEnforcement":null}}`))); err != nil {
		t.Fatal(err)
	}
	if msg, err := bootimages.HeldBack(ctx, c, ""); err != nil || msg != "" {
		t.Fatalf("installed with 4.13: %q, %v", msg, err)
	}
}

// The CLI (machine-api-provider images) does the controller's work one
// step at a time: its plans change nothing; import --apply imports and
// moves the MachineSets that follow, no other; prune --apply deletes the
// provider's images no one names, never the one imported by hand.
func TestImagesTool(t *testing.T) {
	w := cloudWorlds(t)["cloudscale"](t)
	setup(t, w)
	w.release("4.22.1", map[string]string{"rhel-9": "9.6.20260101-0"}, nil)
	w.machineSet("follow", w.zones[0], map[string]string{bootimages.FollowLabel: "true"}, false)
	w.machineSet("stay", w.zones[1], nil, false)
	var out strings.Builder
	tool := &bootimages.Tool{
		Options: bootimages.Options{ClusterID: clusterID, Cloud: w.cloud, Mirror: w.mirror.URL},
		Client:  w.c, Namespace: ns, Out: &out,
		Clients: func(context.Context, string) (cloud.ImageClient, error) { return w.images, nil },
	}
	a9 := bootimages.BootImageName("9.6.20260101-0", "rhel-9", "amd64", clusterID)
	if err := tool.Import(w.ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"import " + a9 + " (RHCOS 9.6.20260101-0, rhel-9, amd64) into " + sorted([]string{w.zones[0], w.zones[1]})[0],
		"openshift-machine-api/follow: custom:rhcos-4.19 -> " + a9 + " once imported", "openshift-machine-api/stay: boots custom:rhcos-4.19, stays", "Nothing changed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the plan does not say %q:\n%s", want, out.String())
		}
	}
	if len(w.cloudImages()) != 0 || w.ref("follow") != w.seeded {
		t.Fatal("the plan changed something")
	}
	out.Reset()
	if err := tool.Import(w.ctx, true); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(w.ref("follow"), a9) || w.ref("stay") != w.seeded {
		t.Fatalf("after import --apply: follow %s, stay %s\n%s", w.ref("follow"), w.ref("stay"), out.String())
	}
	w.release("4.22.2", map[string]string{"rhel-9": "9.6.20260301-0"}, nil)
	if err := tool.Import(w.ctx, true); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := tool.Prune(w.ctx, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "prune custom:"+a9) || len(w.cloudImages()) != 2 {
		t.Fatalf("prune's plan:\n%s (images %v)", out.String(), w.cloudImages())
	}
	if err := tool.Prune(w.ctx, true); err != nil {
		t.Fatal(err)
	}
	if l := w.cloudImages(); len(l) != 1 || strings.Contains(l[0].Name, "20260101") || !w.seededThere() {
		t.Fatalf("after prune --apply: %v, seeded there %v", l, w.seededThere())
	}
}
