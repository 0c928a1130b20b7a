package deployer_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestControllersFollowTheClusterRelease runs the deployer on an API server
// that serves ClusterVersions, as OpenShift does: the machineset-controller
// gets --feature-gates only on releases whose binary has the flag (a 4.16
// binary stops at start on it), an upgrade keeps the older release's flags
// until it completes, and a release newer than any known gets the newest
// known flags with a False ReleaseKnown condition and a Warning event that
// say so.
func TestControllersFollowTheClusterRelease(t *testing.T) {
	cfg, cc := startOpenShift(t, testenv.ProxyCRD(t), testenv.ClusterVersionCRD(t))
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: deployer.ClusterVersionName}}
	cv.Spec.ClusterID = "0b4a2f5e-7d1c-4a3e-9c55-0e1f2a3b4c5d"
	if err := cc.Create(t.Context(), cv); err != nil {
		t.Fatal(err)
	}
	completed := configv1.UpdateHistory{Version: "4.16.3", State: configv1.CompletedUpdate}
	setClusterVersion(t, cc, "4.16.3", completed)

	e := start(t, cfg)
	e.createImages(maoImg1, proxyImg1)
	d := e.waitDeployment(func(d *appsv1.Deployment) bool { return d.Annotations[deployer.ReleaseAnnotation] == "4.16" })
	if hasFeatureGates(d) {
		t.Errorf("4.16: the machineset-controller gets --feature-gates, which its binary does not define: %v", machineSetArgs(d))
	}
	e.waitConditionOf(deployer.ConditionReleaseKnown, metav1.ConditionTrue, "Known", "4.16.3")

	// An upgrade under way: the images may be either release's, so the
	// older release's flags stay until the upgrade completes.
	before := e.reconciles()
	setClusterVersion(t, cc, "4.17.1",
		configv1.UpdateHistory{Version: "4.17.1", State: configv1.PartialUpdate}, completed)
	setImages(e, maoImg2, proxyImg1)
	e.poll("a reconcile of the upgrade", func() (bool, string) { return e.reconciles() > before+1, "" })
	d = e.waitDeployment(func(d *appsv1.Deployment) bool { return image(d, deployer.MachineSetContainer) == maoImg2 })
	if d.Annotations[deployer.ReleaseAnnotation] != "4.16" || hasFeatureGates(d) {
		t.Errorf("during the upgrade to 4.17: rendered for %s with %v; want 4.16's flags until it completes",
			d.Annotations[deployer.ReleaseAnnotation], machineSetArgs(d))
	}

	setClusterVersion(t, cc, "4.17.1",
		configv1.UpdateHistory{Version: "4.17.1", State: configv1.CompletedUpdate}, completed)
	d = e.waitDeployment(func(d *appsv1.Deployment) bool { return d.Annotations[deployer.ReleaseAnnotation] == "4.17" })
	if !slices.Contains(machineSetArgs(d), "--feature-gates=MachineAPIMigration=false") {
		t.Errorf("4.17: machineset-controller args %v, want the migration gate pinned off", machineSetArgs(d))
	}

	// A release newer than any known: the newest known flags, said so.
	setClusterVersion(t, cc, "5.1.0", configv1.UpdateHistory{Version: "5.1.0", State: configv1.CompletedUpdate})
	newest := deployer.Newest().String()
	d = e.waitDeployment(func(d *appsv1.Deployment) bool { return d.Annotations[deployer.ReleaseAnnotation] == newest })
	if !slices.Contains(machineSetArgs(d), "--feature-gates=MachineAPIMigration=false") {
		t.Errorf("5.1 (unknown): machineset-controller args %v, want %s's", machineSetArgs(d), newest)
	}
	c := e.waitConditionOf(deployer.ConditionReleaseKnown, metav1.ConditionFalse, string(deployer.FitNewer), "5.1.0")
	for _, want := range []string{"newest: " + newest, "upgrade the provider"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not say %q", c.Message, want)
		}
	}
	e.waitEvent(corev1.EventTypeWarning, string(deployer.FitNewer), "5.1.0")
	if dep := e.waitCondition(metav1.ConditionTrue, deployer.ReasonApplied); !strings.Contains(dep.Message, "for OpenShift "+newest) {
		t.Errorf("Deployed condition %q does not name the release rendered", dep.Message)
	}
}

// setClusterVersion sets the ClusterVersion's status as the
// cluster-version operator does: the desired release and the history,
// newest first.
func setClusterVersion(t *testing.T, c client.Client, desired string, history ...configv1.UpdateHistory) {
	t.Helper()
	err := retryConflict(func() error {
		cv := &configv1.ClusterVersion{}
		if err := c.Get(t.Context(), types.NamespacedName{Name: deployer.ClusterVersionName}, cv); err != nil {
			return err
		}
		cv.Status.Desired = configv1.Release{Version: desired, Image: "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("a", 64)}
		cv.Status.History = nil
		for _, h := range history {
			h.Image = cv.Status.Desired.Image
			h.StartedTime = metav1.Now()
			if h.State == configv1.CompletedUpdate {
				now := metav1.Now()
				h.CompletionTime = &now
			}
			cv.Status.History = append(cv.Status.History, h)
		}
		cv.Status.VersionHash = "x"
		cv.Status.ObservedGeneration = cv.Generation
		return c.Status().Update(t.Context(), cv)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func machineSetArgs(d *appsv1.Deployment) []string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == deployer.MachineSetContainer {
			return c.Args
		}
	}
	return nil
}

func hasFeatureGates(d *appsv1.Deployment) bool {
	return slices.ContainsFunc(machineSetArgs(d), func(a string) bool { return strings.HasPrefix(a, "--feature-gates") })
}

// waitConditionOf waits for the status condition of type typ with status,
// reason and a message mentioning says.
func (e *env) waitConditionOf(typ string, status metav1.ConditionStatus, reason, says string) metav1.Condition {
	e.t.Helper()
	var got metav1.Condition
	e.poll(fmt.Sprintf("condition %s=%s/%s", typ, status, reason), func() (bool, string) {
		conds, err := deployer.ReadConditions(e.ctx, e.c, e.ns)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(conds, typ)
		if c == nil {
			return false, "no condition"
		}
		got = *c
		return c.Status == status && c.Reason == reason && strings.Contains(c.Message, says), fmt.Sprintf("%+v", *c)
	})
	return got
}
