package appuioswitch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/manager"
)

// Options configure a Switch; zero values take the defaults.
type Options struct {
	// Namespace of the Machine API. Default openshift-machine-api.
	Namespace string
	// Wait bounds each wait: for a lease to be let go, for pods to go.
	// Default 5 minutes.
	Wait time.Duration
	// Poll is how often a wait looks. Default 1 second.
	Poll time.Duration
	// Out receives what the switch finds and does.
	Out io.Writer
	Log logr.Logger
}

// Switch switches a cluster from appuio's provider and back.
type Switch struct {
	kube  client.Client
	cloud *cscloud.Cloud
	o     Options
	now   func() time.Time
}

// New returns a Switch acting on the cluster with kube and on the cloud
// with c, with the credentials the Machines name.
func New(kube client.Client, c *cscloud.Cloud, o Options) *Switch {
	if o.Namespace == "" {
		o.Namespace = "openshift-machine-api"
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return &Switch{kube: kube, cloud: c, o: o, now: time.Now}
}

// Scheme has every kind the switch reads and writes.
func Scheme() (*runtime.Scheme, error) {
	s, err := manager.Scheme()
	if err != nil {
		return nil, err
	}
	if err := configv1.Install(s); err != nil {
		return nil, err
	}
	return s, nil
}

func (w *Switch) printf(format string, args ...any) { fmt.Fprintf(w.o.Out, format+"\n", args...) }

// Plan prints what the cluster holds and what the next step does. Nothing
// changes.
func (w *Switch) Plan(ctx context.Context) (*Survey, error) {
	s, err := w.survey(ctx)
	if err != nil {
		return nil, err
	}
	w.print(s)
	return s, nil
}

func (w *Switch) print(s *Survey) {
	w.printf("cluster %s: %d Machines, %d MachineSets in the cloudscale.ch spec format", orNone(s.ClusterID), len(s.Machines), len(s.MachineSets))
	w.printf("recorded step: %s", orNone(s.Phase()))
	for _, name := range []string{ManagerDeployment, ControllersDeployment, deployerDeployment, ourDeployment} {
		state := "absent"
		if s.Deployments[name] {
			state = "present"
		}
		w.printf("Deployment %s: %s", name, state)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Leases)) {
		l := s.Leases[name]
		state := "released"
		switch {
		case live(l, w.now()):
			state = "held by " + holder(l)
		case holder(l) != "":
			state = "expired (last held by " + holder(l) + ")"
		}
		w.printf("lease %s: %s", name, state)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Secrets)) {
		sec := s.Secrets[name]
		var notes []string
		switch {
		case sec.Exists && sec.Component:
			notes = append(notes, "the component's: removing it deletes the secret")
		case sec.Exists:
			notes = append(notes, "exists")
		default:
			notes = append(notes, "missing")
		}
		if sec.Copy {
			notes = append(notes, "a copy is saved ("+CopyPrefix+name+")")
		}
		w.printf("secret %s (%s of %d): %s", name, strings.Join(sec.Fields, ", "), sec.Users, strings.Join(notes, "; "))
	}
	w.printPause(s)
	w.printGitOps(s)
	for _, n := range s.Notes {
		w.printf("note: %s", n)
	}
	for _, b := range s.Blockers {
		w.printf("BLOCKER: %s", b)
	}
	switch {
	case len(s.Blockers) > 0:
		w.printf("next: fix the blockers")
	case s.Deployments[ManagerDeployment]:
		w.printf("next: --prepare, then remove appuio's component")
	case s.Phase() != phaseSwitched:
		w.printf("next: --apply")
	default:
		w.printf("switched: --rollback goes back, once this provider is removed")
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Recorded steps.
const (
	phasePrepared   = "prepared"
	phaseSwitched   = "switched"
	phaseRolledBack = "rolled-back"
)

// Prepare saves a copy of every Secret the specs name that exists, before
// appuio's component goes (and its Secrets with it). A copy carries no
// label of the component, so Argo CD neither tracks nor prunes it; a copy
// that exists is brought up to date.
func (w *Switch) Prepare(ctx context.Context) error {
	s, err := w.Plan(ctx)
	if err != nil {
		return err
	}
	if len(s.Blockers) > 0 {
		return errors.New("not prepared: fix the blockers first")
	}
	for _, name := range slices.Sorted(maps.Keys(s.Secrets)) {
		if !s.Secrets[name].Exists {
			w.printf("secret %s does not exist: nothing to save", name)
			continue
		}
		if err := w.saveCopy(ctx, name); err != nil {
			return err
		}
		w.printf("saved secret %s as %s", name, CopyPrefix+name)
	}
	if err := w.pause(ctx, s); err != nil {
		return err
	}
	return w.record(ctx, phasePrepared)
}

func (w *Switch) saveCopy(ctx context.Context, name string) error {
	var orig corev1.Secret
	if err := w.kube.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: name}, &orig); err != nil {
		return fmt.Errorf("reading secret %s: %w", name, err)
	}
	cp := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: CopyPrefix + name, Namespace: w.o.Namespace}}
	return w.createOrUpdate(ctx, cp, func() {
		cp.Labels = map[string]string{CopyOfLabel: name}
		cp.Type = orig.Type
		cp.Data = orig.Data
	})
}

// restoreSecrets brings back, from their copies, the Secrets the specs
// name that are gone, as plain Secrets of the namespace (no label of the
// component). A Secret gone without a copy is an error naming it.
func (w *Switch) restoreSecrets(ctx context.Context, s *Survey) error {
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(s.Secrets)) {
		sec := s.Secrets[name]
		if sec.Exists {
			continue
		}
		if !sec.Copy {
			missing = append(missing, name)
			continue
		}
		var cp corev1.Secret
		if err := w.kube.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: CopyPrefix + name}, &cp); err != nil {
			return fmt.Errorf("reading secret %s: %w", CopyPrefix+name, err)
		}
		restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.o.Namespace}, Type: cp.Type, Data: cp.Data}
		if err := w.kube.Create(ctx, restored); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("restoring secret %s: %w", name, err)
		}
		sec.Exists = true
		w.printf("restored secret %s from %s", name, CopyPrefix+name)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the secrets %s, which the Machines name, are gone and no copy was saved (--prepare before removing the component): create them again, with the keys %q and %q", strings.Join(missing, ", "), cscloud.TokenKey, "userData")
	}
	return nil
}

// Apply switches over once appuio's component is gone (see the package
// documentation). It checks everything before it changes anything.
func (w *Switch) Apply(ctx context.Context) error {
	s, err := w.Plan(ctx)
	if err != nil {
		return err
	}
	if len(s.Blockers) > 0 {
		return errors.New("not switched: fix the blockers first")
	}
	if s.Deployments[ManagerDeployment] {
		return fmt.Errorf("not switched: appuio's provider still runs (Deployment %s/%s): remove its component first (--prepare before that saves its Secrets)", w.o.Namespace, ManagerDeployment)
	}
	// Its pods may outlive the Deployment (a background deletion): what
	// shows they are gone is that neither of its leases is held.
	if err := w.awaitLetGo(ctx, ManagerLease, "appuio's machine controller"); err != nil {
		return err
	}
	if err := w.awaitLetGo(ctx, ControllersManagerLease, "appuio's manager, which applies "+ControllersDeployment); err != nil {
		return err
	}
	client, servers, err := w.checkServers(ctx, s)
	if err != nil {
		return err
	}
	// Checked: from here on it changes the cluster; what --prepare
	// pauses first (pause.go).
	if s.Phase() != phaseSwitched {
		if err := w.pause(ctx, s); err != nil {
			return err
		}
	}
	if err := w.restoreSecrets(ctx, s); err != nil {
		return err
	}
	// The groups first: once appuio's controllers are gone, this
	// provider's deployer deploys its own, which may make a server at
	// once. appuio's provider finds the groups by their key as before.
	if client != nil {
		if err := w.handOverGroups(ctx, s.ClusterID, client, servers); err != nil {
			return err
		}
	}
	if err := w.deleteDeployment(ctx, ControllersDeployment); err != nil {
		return err
	}
	if err := w.releaseLeases(ctx, []string{ManagerLease, ControllersManagerLease}, ControllersDeployment+"-", ManagerDeployment+"-"); err != nil {
		return err
	}
	if err := w.record(ctx, phaseSwitched); err != nil {
		return err
	}
	if err := w.resume(ctx); err != nil {
		return err
	}
	w.printf("switched: this provider's deployer deploys %s now", ourDeployment)
	return nil
}

// Rollback leaves the cluster to appuio's provider again, once this
// provider is removed: its leases released, the Secrets the Machines name
// there, every Machine's server found as appuio's provider finds it.
func (w *Switch) Rollback(ctx context.Context) error {
	s, err := w.Plan(ctx)
	if err != nil {
		return err
	}
	for _, name := range []string{deployerDeployment, ourDeployment} {
		if s.Deployments[name] {
			return fmt.Errorf("not rolled back: this provider still runs (Deployment %s/%s): remove it first", w.o.Namespace, name)
		}
	}
	if s.Deployments[ManagerDeployment] {
		return fmt.Errorf("not rolled back: appuio's provider runs already (Deployment %s/%s): this step comes before its component", w.o.Namespace, ManagerDeployment)
	}
	if err := w.awaitLetGo(ctx, ourLease, "this provider's machine controller"); err != nil {
		return err
	}
	if _, _, err := w.checkServers(ctx, s); err != nil {
		return err
	}
	if err := w.restoreSecrets(ctx, s); err != nil {
		return err
	}
	if err := w.releaseLeases(ctx, []string{ourLease, deployerLease}, ourDeployment+"-", deployerDeployment+"-"); err != nil {
		return err
	}
	if err := w.record(ctx, phaseRolledBack); err != nil {
		return err
	}
	if err := w.resume(ctx); err != nil {
		return err
	}
	w.printf("rolled back: add appuio's component again")
	return nil
}

// checkServers finds every Machine's server as both providers do (by the
// Machine's name and the cluster's tags): exactly one, the one its
// providerID names. It returns the client and the cluster's servers'
// UUIDs; nil without Machines.
func (w *Switch) checkServers(ctx context.Context, s *Survey) (*cscloud.Client, map[string]bool, error) {
	if len(s.Machines) == 0 || s.ClusterID == "" {
		return nil, nil, nil
	}
	creds, err := w.credentials(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	cc, err := w.cloud.NewClient(creds, cloud.NewGate(w.cloud.Name(), w.cloud.DefaultRateLimit()))
	if err != nil {
		return nil, nil, err
	}
	client := cc.(*cscloud.Client)
	servers, err := client.ListServers(ctx, cloud.Selector{ClusterID: s.ClusterID})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the cluster's servers: %w", err)
	}
	byMachine := map[string][]string{}
	for _, sv := range servers {
		byMachine[sv.Machine] = append(byMachine[sv.Machine], sv.ID)
	}
	var problems []string
	for _, m := range s.Machines {
		ids := byMachine[m.Name]
		pid := ""
		if m.Spec.ProviderID != nil {
			pid = strings.TrimPrefix(*m.Spec.ProviderID, cscloud.Name+"://")
		}
		switch {
		case len(ids) > 1:
			problems = append(problems, fmt.Sprintf("Machine %s has %d servers tagged as its (%s)", m.Name, len(ids), strings.Join(ids, ", ")))
		case len(ids) == 0 && pid != "":
			problems = append(problems, fmt.Sprintf("Machine %s: its server %s carries no tags naming it: a provider would make it another", m.Name, pid))
		case len(ids) == 1 && pid != "" && ids[0] != pid:
			problems = append(problems, fmt.Sprintf("Machine %s names server %s, the tags server %s", m.Name, pid, ids[0]))
		}
	}
	w.printf("cloud: %d servers tagged as cluster %s's, every Machine's found once: %t", len(servers), s.ClusterID, len(problems) == 0)
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("the servers do not match the Machines: %s", strings.Join(problems, "; "))
	}
	return client, cscloud.ClusterServerIDs(servers), nil
}

// credentials are those the Machines name (one secret for all), else the
// default ones of the cloud.
func (w *Switch) credentials(ctx context.Context, s *Survey) (cloud.Credentials, error) {
	names := map[string]bool{}
	for name, sec := range s.Secrets {
		for _, f := range sec.Fields {
			if f == "tokenSecret" {
				names[name] = true
			}
		}
	}
	switch len(names) {
	case 0:
		return cloud.ReadCredentials(ctx, w.kube, w.cloud, w.o.Namespace, "", "")
	case 1:
		name := slices.Sorted(maps.Keys(names))[0]
		if sec := s.Secrets[name]; !sec.Exists && sec.Copy {
			// Gone with the component; its copy comes back later.
			name = CopyPrefix + name
		}
		return cloud.ReadCredentials(ctx, w.kube, w.cloud, w.o.Namespace, name, "spec.providerSpec.value.tokenSecret")
	}
	return cloud.Credentials{}, fmt.Errorf("the Machines name %d token secrets (%s): the switch reads one account", len(names), strings.Join(slices.Sorted(maps.Keys(names)), ", "))
}

// handOverGroups tags appuio's anti-affinity groups that hold only the
// cluster's servers as the cluster's; others are named and left alone.
func (w *Switch) handOverGroups(ctx context.Context, clusterID string, c *cscloud.Client, servers map[string]bool) error {
	groups, err := c.AntiAffinityGroups(ctx)
	if err != nil {
		return fmt.Errorf("listing the server groups: %w", err)
	}
	for _, g := range groups {
		if g.ClusterID == clusterID {
			w.printf("server group %s (%s, key %s): the cluster's", g.Name, g.ID, g.Key)
			continue
		}
		if g.ClusterID != "" {
			continue
		}
		changed, why, err := c.HandOverGroup(ctx, g.ID, clusterID, servers)
		switch {
		case err != nil:
			return err
		case why != "":
			w.printf("server group %s (%s, key %s): left alone, %s", g.Name, g.ID, g.Key, why)
		case changed:
			w.printf("server group %s (%s, key %s): handed over (tagged as cluster %s's)", g.Name, g.ID, g.Key, clusterID)
		}
	}
	return nil
}

// deleteDeployment deletes a Deployment in the foreground and waits until
// it is gone: then its pods are gone too.
func (w *Switch) deleteDeployment(ctx context.Context, name string) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.o.Namespace}}
	err := w.kube.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting Deployment %s: %w", name, err)
	}
	w.printf("deleting Deployment %s and its pods", name)
	return w.await(ctx, "Deployment "+name+" and its pods to be gone", func() (bool, error) {
		err := w.kube.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// awaitLetGo waits until a lease is not held any more: released, or not
// renewed for its whole duration while watched (by this host's clock only,
// not the holder's).
func (w *Switch) awaitLetGo(ctx context.Context, name, who string) error {
	var (
		seen  string
		since time.Time
	)
	return w.await(ctx, fmt.Sprintf("lease %s to be let go (%s)", name, who), func() (bool, error) {
		var l coordinationv1.Lease
		err := w.kube.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: name}, &l)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if holder(&l) == "" {
			return true, nil
		}
		if l.ResourceVersion != seen {
			seen, since = l.ResourceVersion, w.now()
		}
		d := 15 * time.Second
		if l.Spec.LeaseDurationSeconds != nil {
			d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		return w.now().Sub(since) > d, nil
	})
}

// releaseLeases releases the named leases and the machine-api-operator
// controllers' ones held by pods whose names begin with one of prefixes,
// as a leader does when it stops (holder "", duration 1 s), so that the
// next controllers take them at once.
func (w *Switch) releaseLeases(ctx context.Context, names []string, prefixes ...string) error {
	for _, name := range append(names, operatorLeases...) {
		var l coordinationv1.Lease
		err := w.kube.Get(ctx, client.ObjectKey{Namespace: w.o.Namespace, Name: name}, &l)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading lease %s: %w", name, err)
		}
		h := holder(&l)
		if h == "" {
			continue
		}
		ours := false
		for _, p := range prefixes {
			ours = ours || strings.HasPrefix(h, p)
		}
		if !ours && !slices.Contains(names, name) {
			continue
		}
		empty, one := "", int32(1)
		now := metav1.NewMicroTime(w.now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = &empty, &one, &now, &now
		if err := w.kube.Update(ctx, &l); err != nil {
			return fmt.Errorf("releasing lease %s: %w", name, err)
		}
		w.printf("released lease %s (held by %s)", name, h)
	}
	return nil
}

// record writes the step done.
func (w *Switch) record(ctx context.Context, phase string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordConfigMap, Namespace: w.o.Namespace}}
	return w.createOrUpdate(ctx, cm, func() {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["phase"] = phase
		cm.Data[phase+"At"] = w.now().UTC().Format(time.RFC3339)
	})
}

func (w *Switch) createOrUpdate(ctx context.Context, obj client.Object, mutate func()) error {
	err := w.kube.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		mutate()
		return w.kube.Create(ctx, obj)
	case err != nil:
		return err
	}
	mutate()
	return w.kube.Update(ctx, obj)
}

// await polls cond until it holds, fails, or Wait passes.
func (w *Switch) await(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := w.now().Add(w.o.Wait)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if w.now().After(deadline) {
			return fmt.Errorf("%s did not happen within %s", what, w.o.Wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(w.o.Poll):
		}
	}
}
