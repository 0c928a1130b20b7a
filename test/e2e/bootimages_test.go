package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	cloudpkg "github.com/appuio/machine-api-provider/pkg/cloud"
	bootimagesctl "github.com/appuio/machine-api-provider/pkg/controllers/bootimages"
	"github.com/appuio/machine-api-provider/pkg/demo"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// publish writes a release's ConfigMap and serves its files from the
// test's mirror; tamper and drop name files (their suffix) served altered
// or not at all.
func publish(t *testing.T, m *imagefetch.Server, e *demo.Env, r bootimages.FakeRelease, tamper, drop string) {
	t.Helper()
	files, err := e.PublishRelease(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range files {
		switch {
		case tamper != "" && strings.HasSuffix(p, tamper):
			files[p] = append(slices.Clone(b), "tampered"...)
		case drop != "" && strings.HasSuffix(p, drop):
			delete(files, p)
		}
	}
	m.Set(files)
}

// until polls cond every half second, at most timeout.
func until(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
}

func TestBootImagesFollowTheRelease(t *testing.T) { eachCloud(t, testBootImagesFollowTheRelease) }

// The release's boot images on the whole local cluster: the provider
// imports the release's RHCOS from the test's mirror, the MachineSets that
// follow move to it (rhel-10's to rhel-10's), the others stay; a scale-up
// boots it; an upgrade (a new coreos-bootimages) does it again, and the old
// image goes once its last Machine does; the skew record is written only
// with the user's consent; failed imports (a checksum that does not match,
// a file not there, a zone the image cannot reach) leave the MachineSets on
// their image with a condition and an event.
func testBootImagesFollowTheRelease(t *testing.T, cloud string) {
	mirror := imagefetch.NewServer("/rhcos", nil)
	t.Cleanup(mirror.Close)
	e := start(t, cloud, false, func(o *demo.Options) {
		o.BootImages = bootimagesctl.Options{Options: bootimages.Options{Mirror: mirror.URL},
			Interval: 2 * time.Second, PruneAfter: 5 * time.Second, RetryAfter: time.Hour}
	})
	ctx := context.Background()
	name := func(rhcos, stream string) string {
		return bootimages.BootImageName(rhcos, stream, "amd64", e.Options.ClusterID)
	}
	ref := func(ms string) string {
		t.Helper()
		var m machinev1.MachineSet
		if err := e.Client.Get(ctx, types.NamespacedName{Namespace: demo.Namespace, Name: ms}, &m); err != nil {
			t.Fatal(err)
		}
		return string(m.Spec.Template.Spec.ProviderSpec.Value.Raw)
	}
	cond := func(ms string) *machinev1.Condition {
		var m machinev1.MachineSet
		if err := e.Client.Get(ctx, types.NamespacedName{Namespace: demo.Namespace, Name: ms}, &m); err != nil {
			t.Fatal(err)
		}
		for i := range m.Status.Conditions {
			if m.Status.Conditions[i].Type == bootimagesctl.ConditionType {
				return &m.Status.Conditions[i]
			}
		}
		return nil
	}
	waitReason := func(ms, reason string) *machinev1.Condition {
		t.Helper()
		var c *machinev1.Condition
		until(t, 3*time.Minute, ms+" "+reason, func() (bool, string) {
			c = cond(ms)
			if c == nil {
				return false, "no condition"
			}
			return c.Reason == reason, c.Reason + ": " + c.Message
		})
		return c
	}
	events := func(ms, reason string) int {
		var l corev1.EventList
		if err := e.Client.List(ctx, &l, client.InNamespace(demo.Namespace)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range l.Items {
			if ev.InvolvedObject.Name == ms && ev.Reason == reason {
				n++
			}
		}
		return n
	}
	scale := func(ms string, n int) {
		t.Helper()
		m := &machinev1.MachineSet{}
		m.Namespace, m.Name = demo.Namespace, ms
		if err := e.Client.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))); err != nil {
			t.Fatal(err)
		}
	}
	runningImages := func(ms string) (images []string, machines []machinev1.Machine) {
		var l machinev1.MachineList
		if err := e.Client.List(ctx, &l, client.InNamespace(demo.Namespace), client.MatchingLabels{"machine.openshift.io/cluster-api-machineset": ms}); err != nil {
			t.Fatal(err)
		}
		for _, m := range l.Items {
			if m.Status.Phase == nil || *m.Status.Phase != "Running" || m.Spec.ProviderID == nil || m.DeletionTimestamp != nil {
				continue
			}
			img, err := e.ServerImage(*m.Spec.ProviderID)
			if err == nil {
				images = append(images, img)
				machines = append(machines, m)
			}
		}
		return images, machines
	}
	skew := func() operatorv1.BootImageSkewEnforcementConfig {
		mc := &operatorv1.MachineConfiguration{}
		if err := e.Client.Get(ctx, types.NamespacedName{Name: "cluster"}, mc); err != nil {
			t.Fatal(err)
		}
		return mc.Spec.BootImageSkewEnforcement
	}

	// Release A, and three MachineSets: one follows, one follows on
	// rhel-10, one does not.
	publish(t, mirror, e, bootimages.FakeRelease{Version: "4.22.1", RHCOS: map[string]string{"rhel-9": "9.6.20260101-0", "rhel-10": "10.1.20260102-0"}}, "", "")
	follow, rhel10, stay := e.MachineSetName, e.Options.ClusterID+"-worker-rhel10", e.Options.ClusterID+"-worker-stay"
	for _, ms := range []*machinev1.MachineSet{e.MachineSet(""), e.NamedMachineSet(rhel10, ""), e.NamedMachineSet(stay, "")} {
		switch ms.Name {
		case follow:
			ms.Labels[bootimages.FollowLabel] = "true"
		case rhel10:
			ms.Labels[bootimages.FollowLabel] = "true"
			ms.Labels[bootimages.LabelOSStream] = "rhel-10"
		}
		if err := e.Client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
	}
	seeded := ref(stay)
	a9, a10 := name("9.6.20260101-0", "rhel-9"), name("10.1.20260102-0", "rhel-10")
	waitReason(follow, bootimagesctl.ReasonCurrent)
	waitReason(rhel10, bootimagesctl.ReasonCurrent)
	waitReason(stay, bootimagesctl.ReasonNotFollowing)
	if !strings.Contains(ref(follow), a9) || !strings.Contains(ref(rhel10), a10) || ref(stay) != seeded {
		t.Fatalf("after release A: follow %s, rhel10 %s, stay %s", ref(follow), ref(rhel10), ref(stay))
	}
	for _, ms := range []string{follow, rhel10} {
		if awaitEvent(t, e.Client, demo.Namespace, ms, bootimagesctl.ReasonUpdated, nil) {
			if n := events(ms, bootimagesctl.ReasonUpdated); n != 1 {
				t.Errorf("%s: %d update events, want 1", ms, n)
			}
		}
	}

	// A scale-up boots it.
	scale(follow, 1)
	until(t, 3*time.Minute, "a Machine of follow Running", func() (bool, string) {
		imgs, _ := runningImages(follow)
		return len(imgs) == 1, strings.Join(imgs, ",")
	})
	if imgs, _ := runningImages(follow); !strings.Contains(imgs[0], a9) {
		t.Fatalf("the new server booted %s, want %s", imgs[0], a9)
	}

	// No record without consent, even once every MachineSet boots an image
	// the provider knows (stay goes).
	if _, n := testenv.Metric(t, "machine_api_provider_machineset_boot_image_outdated", map[string]string{"cloud": cloud, "machineset": stay}); n != 1 {
		t.Fatalf("%s has %d series of machine_api_provider_machineset_boot_image_outdated, want 1", stay, n)
	}
	if err := e.Client.Delete(ctx, e.NamedMachineSet(stay, "")); err != nil {
		t.Fatal(err)
	}
	// Once the controller's pass saw it gone (stay's series of
	// machine_api_provider_machineset_boot_image_outdated goes in the pass,
	// before the skew is looked at) and ended, it would have recorded.
	until(t, time.Minute, "the controller sees "+stay+" gone", func() (bool, string) {
		_, n := testenv.Metric(t, "machine_api_provider_machineset_boot_image_outdated", map[string]string{"cloud": cloud, "machineset": stay})
		return n == 0, fmt.Sprintf("%d series", n)
	})
	passes := func() float64 {
		return testenv.Counter(t, "machine_api_provider_boot_image_passes_total", map[string]string{"cloud": cloud, "result": "ok"})
	}
	n := passes()
	until(t, time.Minute, "a pass of the boot image controller ends", func() (bool, string) { return passes() > n, fmt.Sprint(passes()) })
	if rec := skew(); rec.Mode != "" {
		t.Fatalf("skew recorded without consent: %+v", rec)
	}
	// With consent (the manager restarted with --boot-images-record-skew).
	e.StopMachineAPI()
	e.Options.BootImages.RecordSkew = true
	if err := e.StartMachineAPI(); err != nil {
		t.Fatal(err)
	}
	until(t, time.Minute, "the skew record", func() (bool, string) {
		rec := skew()
		return rec.Mode == operatorv1.BootImageSkewEnforcementConfigModeManual && rec.Manual.RHCOSVersion == "9.6.20260101-0", fmt.Sprintf("%+v", rec)
	})

	// An upgrade: release B.
	publish(t, mirror, e, bootimages.FakeRelease{Version: "4.22.2", RHCOS: map[string]string{"rhel-9": "9.6.20260301-0", "rhel-10": "10.1.20260302-0"}}, "", "")
	b9, b10 := name("9.6.20260301-0", "rhel-9"), name("10.1.20260302-0", "rhel-10")
	until(t, 3*time.Minute, "the followers on release B", func() (bool, string) {
		return strings.Contains(ref(follow), b9) && strings.Contains(ref(rhel10), b10), ref(follow) + " " + ref(rhel10)
	})
	scale(follow, 2)
	until(t, 3*time.Minute, "a Machine on release B", func() (bool, string) {
		imgs, _ := runningImages(follow)
		return len(imgs) == 2 && slices.ContainsFunc(imgs, func(s string) bool { return strings.Contains(s, b9) }), strings.Join(imgs, ",")
	})
	until(t, time.Minute, "the skew record follows", func() (bool, string) {
		rec := skew()
		return rec.Manual.RHCOSVersion == "9.6.20260301-0", fmt.Sprintf("%+v", rec)
	})
	// A10 goes (no one names it); A9 stays while its Machine runs, then goes.
	imagesNow := func() []string {
		var out []string
		switch {
		case e.Cloudscale != nil:
			out = e.Cloudscale.CustomImageSlugs()
		default:
			for _, tpl := range e.Exoscale.Templates() {
				out = append(out, tpl.Name)
			}
		}
		return out
	}
	until(t, time.Minute, "A10 pruned", func() (bool, string) {
		return !slices.ContainsFunc(imagesNow(), func(s string) bool { return strings.Contains(s, a10) }), strings.Join(imagesNow(), ",")
	})
	if !slices.ContainsFunc(imagesNow(), func(s string) bool { return strings.Contains(s, a9) }) {
		t.Fatalf("A9 pruned while a Machine boots it: %v", imagesNow())
	}
	imgs, machines := runningImages(follow)
	for i, img := range imgs {
		if strings.Contains(img, a9) {
			if err := e.Client.Delete(ctx, &machines[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	until(t, 3*time.Minute, "A9 pruned after its last Machine", func() (bool, string) {
		return !slices.ContainsFunc(imagesNow(), func(s string) bool { return strings.Contains(s, a9) }), strings.Join(imagesNow(), ",")
	})
	// The image the installation imported by hand stays.
	if !slices.ContainsFunc(imagesNow(), func(s string) bool { return strings.Contains(s, "rhcos-4.19") }) {
		t.Fatalf("the hand-imported image was deleted: %v", imagesNow())
	}

	// A zone the image is not in yet: a following MachineSet there. On
	// cloudscale.ch (an image's zones are fixed at its import) the image is
	// imported again for both zones, and the MachineSet moves to it; on
	// Exoscale the template's copy to the zone fails (injected), and the
	// MachineSet stays, saying so, while the others go on.
	zoneMS := e.Options.ClusterID + "-worker-zone"
	other := e.OtherZone()
	if cloud == demo.Exoscale {
		other = "de-fra-1"
		if err := e.Exoscale.AddOperationFailure(emuexo.OperationFailure{Command: "copy-template", Rate: 1, Reason: "unavailable", Message: "zone de-fra-1 cannot take templates now"}); err != nil {
			t.Fatal(err)
		}
	}
	zs := e.NamedMachineSet(zoneMS, other)
	zs.Labels[bootimages.FollowLabel] = "true"
	if err := e.Client.Create(ctx, zs); err != nil {
		t.Fatal(err)
	}
	if cloud == demo.Exoscale {
		zc := waitReason(zoneMS, cloudpkg.ReasonZoneUnavailable)
		if !strings.Contains(zc.Message, "keeps booting") || !strings.Contains(ref(zoneMS), "rhcos-4.19") {
			t.Fatalf("zone failure: %+v, %s", zc, ref(zoneMS))
		}
		if c := cond(follow); c == nil || c.Reason != bootimagesctl.ReasonCurrent {
			t.Fatalf("follow after another zone's failure: %+v", c)
		}
		awaitEvent(t, e.Client, demo.Namespace, zoneMS, cloudpkg.ReasonZoneUnavailable, nil)
	} else {
		waitReason(zoneMS, bootimagesctl.ReasonCurrent)
		if !strings.Contains(ref(zoneMS), b9) || !strings.Contains(ref(follow), b9) {
			t.Fatalf("zone MachineSet on %s, follow on %s", ref(zoneMS), ref(follow))
		}
	}
	if err := e.Client.Delete(ctx, zs); err != nil {
		t.Fatal(err)
	}

	// Failures: release C's rhel-9 file does not match, its rhel-10 file
	// is missing.
	before9, before10 := ref(follow), ref(rhel10)
	suffix := "openstack.x86_64.qcow2"
	if cloud == demo.Exoscale {
		suffix = "exoscale.x86_64.qcow2"
	}
	publish(t, mirror, e, bootimages.FakeRelease{Version: "4.22.3", RHCOS: map[string]string{"rhel-9": "9.6.20260501-0", "rhel-10": "10.1.20260502-0"}},
		"9.6.20260501-0-"+suffix, "10.1.20260502-0-"+suffix)
	c := waitReason(follow, cloudpkg.ReasonChecksumMismatch)
	waitReason(rhel10, cloudpkg.ReasonImportFailed)
	if c.Status != corev1.ConditionFalse || ref(follow) != before9 || ref(rhel10) != before10 {
		t.Fatalf("after failed imports: %+v; follow %s, rhel10 %s", c, ref(follow), ref(rhel10))
	}
	awaitEvent(t, e.Client, demo.Namespace, follow, cloudpkg.ReasonChecksumMismatch, nil)
	awaitEvent(t, e.Client, demo.Namespace, rhel10, cloudpkg.ReasonImportFailed, nil)
}
