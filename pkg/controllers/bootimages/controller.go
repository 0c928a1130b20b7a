// Package bootimages is the boot image controller (off by default: the
// manager's --boot-images-mirror turns it on). While its manager leads it
// keeps the cluster's MachineSets booting their release's RHCOS: it reads
// the release's images (ConfigMap coreos-bootimages), imports each into the
// zones the MachineSets use, from the operator's mirror (pkg/bootimages),
// moves the MachineSets that follow the release to it once it is usable,
// says on every MachineSet whether it boots the release's image (condition
// BootImageCurrent, events, metrics), records the oldest boot image in
// MachineConfiguration cluster when allowed, and deletes its images that no
// MachineSet or Machine names any more, after a grace. It never changes a
// MachineSet with an owner reference, never points one at an image it did
// not import, never deletes an image without the cluster's marks, and
// replaces no Machine.
package bootimages

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// ConditionType on a MachineSet says whether it boots its release's image.
const ConditionType machinev1.ConditionType = "BootImageCurrent"

// Reasons of the condition and the events.
const (
	ReasonCurrent          = "Current"
	ReasonUpdated          = "BootImageUpdated"
	ReasonNotFollowing     = "NotFollowing"
	ReasonImporting        = "ImportInProgress"
	ReasonImported         = "BootImageImported"
	ReasonNoReleaseImage   = "NoReleaseImage"
	ReasonUpdateFailed     = "UpdateFailed"
	ReasonPruned           = "BootImagePruned"
	ReasonSkewRecorded     = "BootImageSkewRecorded"
	ReasonMirrorUnreadable = "MirrorUnreadable"
)

// Options configure the controller.
type Options struct {
	bootimages.Options
	// Namespace of the MachineSets, Machines and credentials secrets.
	Namespace string
	// Interval between passes (the ConfigMap is read in each). Default 1m.
	Interval time.Duration
	// RecordSkew allows writing MachineConfiguration cluster's
	// spec.bootImageSkewEnforcement (--boot-images-record-skew).
	RecordSkew bool
	// PruneAfter is how long an image of the provider's must be named by
	// no MachineSet or Machine before it is deleted; 0 never deletes.
	PruneAfter time.Duration
	// RetryAfter is the first wait after a failed import, doubled up to
	// an hour. Default 5m.
	RetryAfter time.Duration
	Log        logr.Logger
	// Now replaces time.Now (tests).
	Now func() time.Time
}

// Controller runs the passes.
type Controller struct {
	client   client.Client
	reader   client.Reader // the API, for the ConfigMap and secrets
	accounts *cloud.Accounts
	recorder record.EventRecorder
	o        Options
	kick     chan struct{}

	mu      sync.Mutex
	imports map[string]*importJob
	// unused is when each image (by ID) was first seen unreferenced.
	unused map[string]time.Time
}

// importJob is an import under way or done.
type importJob struct {
	running  bool
	zones    []string // the zones it imports into
	err      error
	failures int
	retryAt  time.Time
}

// New builds the controller.
func New(c client.Client, reader client.Reader, accounts *cloud.Accounts, recorder record.EventRecorder, o Options) (*Controller, error) {
	if _, ok := o.Cloud.(cloud.ImageCloud); !ok {
		return nil, fmt.Errorf("cloud %s has no boot images", o.Cloud.Name())
	}
	if o.Mirror == "" {
		return nil, errors.New("no mirror: the boot image controller imports from the operator's mirror (--boot-images-mirror)")
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Controller{
		client: c, reader: reader, accounts: accounts, recorder: recorder, o: o,
		kick: make(chan struct{}, 1), imports: map[string]*importJob{}, unused: map[string]time.Time{},
	}, nil
}

// NeedLeaderElection: only the leader imports and changes MachineSets.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs a pass at once, then every Interval and whenever an import
// ends, until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	t := time.NewTicker(c.o.Interval)
	defer t.Stop()
	for {
		err := c.Pass(ctx)
		switch {
		case err == nil:
			passes.WithLabelValues(c.o.Cloud.Name(), "ok").Inc()
		case ctx.Err() == nil:
			passes.WithLabelValues(c.o.Cloud.Name(), "error").Inc()
			c.o.Log.Error(err, "boot images")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.kick:
		}
	}
}

func (c *Controller) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// account is the image client of the credentials a MachineSet names.
func (c *Controller) account(ctx context.Context, secret string) (cloud.ImageClient, error) {
	field := "spec.template.spec.providerSpec.value.credentialsSecret"
	creds, err := cloud.ReadCredentials(ctx, c.reader, c.o.Cloud, c.o.Namespace, secret, field)
	if err != nil {
		return nil, err
	}
	acc, err := c.accounts.Get("boot-images/"+secret, creds)
	if err != nil {
		return nil, err
	}
	ic, ok := acc.Client.(cloud.ImageClient)
	if !ok {
		return nil, fmt.Errorf("the %s client has no boot images", c.o.Cloud.Name())
	}
	return ic, nil
}

// Pass looks at every MachineSet once and acts.
func (c *Controller) Pass(ctx context.Context) error {
	rel, err := bootimages.LoadRelease(ctx, c.reader)
	if err != nil {
		return err
	}
	var sets machinev1.MachineSetList
	if err := c.client.List(ctx, &sets, client.InNamespace(c.o.Namespace)); err != nil {
		return err
	}
	var machines machinev1.MachineList
	if err := c.client.List(ctx, &machines, client.InNamespace(c.o.Namespace)); err != nil {
		return err
	}
	states, err := bootimages.Survey(rel, sets.Items, c.o.Options)
	if err != nil {
		return err
	}
	var ours []*bootimages.MachineSet
	for _, m := range states {
		if m.Ours {
			ours = append(ours, m)
		}
	}
	refs := bootimages.References(c.o.Options, sets.Items, machines.Items)
	var all []cloud.BootImage
	var errs []error
	for secret, needs := range bootimages.Needs(ours) {
		ic, err := c.account(ctx, secret)
		if err != nil {
			errs = append(errs, err)
			for _, n := range needs {
				for _, m := range n.MachineSets {
					c.condition(ctx, m, corev1.ConditionFalse, cloud.ReasonImportFailed, fmt.Sprintf("no client for the credentials: %v", err))
				}
			}
			continue
		}
		seen := c.jobs()
		images, err := ic.ListBootImages(ctx, c.o.ClusterID)
		if err != nil {
			// a zone that did not answer: its images are missing from
			// the list, which then prunes nothing
			errs = append(errs, err)
		}
		all = append(all, images...)
		for _, n := range needs {
			c.need(ctx, secret, ic, n, images, seen)
		}
		if err == nil {
			c.prune(ctx, ic, images, refs, ours)
		}
	}
	for _, m := range states {
		if m.Ours && m.Want == nil {
			c.condition(ctx, m, corev1.ConditionFalse, ReasonNoReleaseImage, m.Problem)
		}
	}
	c.exportMetrics(ours, all)
	if c.o.RecordSkew {
		c.recordSkew(ctx, states, all)
	}
	return errors.Join(errs...)
}

// need imports what n lacks, or says how its import goes, and moves the
// MachineSets that follow once the image is there.
func (c *Controller) need(ctx context.Context, secret string, ic cloud.ImageClient, n *bootimages.Need, images []cloud.BootImage, seen map[string]importJob) {
	var missing []string
	for _, z := range n.Zones {
		if !slices.ContainsFunc(images, func(im cloud.BootImage) bool {
			return im.RHCOS == n.Image.RHCOS && im.Stream == n.Image.Stream && im.Arch == n.Image.Arch && im.Ready && slices.Contains(im.Zones, z)
		}) {
			missing = append(missing, z)
		}
	}
	// One import of an image at a time, whatever zones the MachineSets add
	// while it runs: a second one would make the image a second time (a
	// cloudscale.ch custom image under the next slug, an Exoscale template
	// registered again). The zones it did not cover are imported by the
	// pass after it ended; a failed one waits for its retry, unless zones it
	// never tried are missing (one zone's fault does not hold another's).
	key := secret + "|" + n.Key()
	// The verdicts come from the jobs as they were before the images were
	// listed (seen): a job that ended since has changed the cloud after
	// the list (an image deleted for its checksum, another made), so its
	// zones wait for the next pass's list.
	was, wasKnown := seen[key]
	c.mu.Lock()
	job := c.imports[key]
	now := c.o.Now()
	changedSince := job != nil && (!wasKnown || was.running) && !job.running
	start := len(missing) > 0 && !changedSince && (job == nil ||
		(!job.running && (job.err == nil || !now.Before(job.retryAt) || !cloud.CoversZones(job.zones, missing))))
	if start {
		if job == nil {
			job = &importJob{}
			c.imports[key] = job
		}
		job.running, job.err, job.zones = true, nil, missing
	}
	c.mu.Unlock()
	running := start || was.running || changedSince
	failed := !running && was.err != nil
	jobErr, jobZones := was.err, was.zones
	if start {
		jobZones = missing
	}
	if start {
		c.startImport(ctx, secret, ic, n, missing, key)
	}
	var failures map[string]*cloud.BootImageError // by zone, "" all
	if failed {
		failures = map[string]*cloud.BootImageError{}
		for _, be := range bootimages.Errors(jobErr) {
			failures[be.Zone] = be
		}
	}
	for _, m := range n.MachineSets {
		target := bootimages.Target(images, m)
		if running && (changedSince || slices.Contains(jobZones, m.Zone)) {
			// an Exoscale template is listed while its registration or
			// copy runs: usable only once the import says so
			target = nil
		}
		switch {
		case target != nil && (m.Ref == target.Ref || m.Ref == target.ID):
			c.condition(ctx, m, corev1.ConditionTrue, ReasonCurrent, fmt.Sprintf("boots %s, RHCOS %s of OpenShift %s (%s, %s)", target.Ref, target.RHCOS, n.Image.Release, m.Stream, m.Arch))
		case target != nil && m.Follow:
			c.follow(ctx, m, target, n.Image)
		case target != nil:
			c.condition(ctx, m, corev1.ConditionFalse, ReasonNotFollowing, fmt.Sprintf("boots %s; the release's image %s (RHCOS %s) is ready, but %s", m.Ref, target.Ref, target.RHCOS, m.WhyNot))
		case failed && (failures[m.Zone] != nil || failures[""] != nil):
			be := failures[m.Zone]
			if be == nil {
				be = failures[""]
			}
			c.condition(ctx, m, corev1.ConditionFalse, be.Reason, fmt.Sprintf("keeps booting %s: the import of RHCOS %s (%s, %s) failed: %v; retried later", m.Ref, n.Image.RHCOS, m.Stream, m.Arch, be))
		case running:
			c.condition(ctx, m, corev1.ConditionFalse, ReasonImporting, fmt.Sprintf("boots %s; RHCOS %s (%s, %s) of OpenShift %s is being imported into %s", m.Ref, n.Image.RHCOS, m.Stream, m.Arch, n.Image.Release, strings.Join(n.Zones, ", ")))
		default:
			c.condition(ctx, m, corev1.ConditionFalse, ReasonImporting, fmt.Sprintf("boots %s; RHCOS %s (%s, %s) is not in zone %s yet", m.Ref, n.Image.RHCOS, m.Stream, m.Arch, m.Zone))
		}
	}
}

// jobs copies the import jobs' states.
func (c *Controller) jobs() map[string]importJob {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]importJob, len(c.imports))
	for k, j := range c.imports {
		out[k] = *j
	}
	return out
}

// startImport imports n into zones in the background; the pass after it
// ends sees the images, or the failure.
func (c *Controller) startImport(ctx context.Context, secret string, ic cloud.ImageClient, n *bootimages.Need, zones []string, key string) {
	log := c.o.Log.WithValues("image", n.Image.Name(c.o.ClusterID), "zones", zones)
	for _, m := range n.MachineSets {
		c.event(m.MS, corev1.EventTypeNormal, ReasonImporting, fmt.Sprintf("importing RHCOS %s (%s, %s) of OpenShift %s into %s", n.Image.RHCOS, n.Image.Stream, n.Image.Arch, n.Image.Release, strings.Join(zones, ", ")))
	}
	go func() {
		started := c.o.Now()
		// every zone of the need: the cloud finds the image where it is
		// (an Exoscale template is copied from there, not registered and
		// downloaded again)
		err := c.importImage(ctx, ic, n, n.Zones)
		if ctx.Err() != nil {
			// the manager stops (leadership lost): no verdict, the next
			// leader looks again
			c.mu.Lock()
			delete(c.imports, key)
			c.mu.Unlock()
			return
		}
		result := "success"
		if err != nil {
			result = "failure"
			for _, be := range bootimages.Errors(err) {
				importFailures.WithLabelValues(c.o.Cloud.Name(), be.Reason).Inc()
			}
			log.Error(err, "boot image import failed")
		}
		importsDone.WithLabelValues(c.o.Cloud.Name(), result).Inc()
		importSeconds.WithLabelValues(c.o.Cloud.Name()).Observe(c.o.Now().Sub(started).Seconds())
		c.mu.Lock()
		job := c.imports[key]
		job.running, job.err = false, err
		if err != nil {
			job.failures++
			wait := c.o.RetryAfter << min(job.failures-1, 4)
			job.retryAt = c.o.Now().Add(min(wait, time.Hour))
		} else {
			job.failures = 0
		}
		c.mu.Unlock()
		for _, m := range n.MachineSets {
			if err == nil {
				c.event(m.MS, corev1.EventTypeNormal, ReasonImported, fmt.Sprintf("imported RHCOS %s (%s, %s) of OpenShift %s into %s", n.Image.RHCOS, n.Image.Stream, n.Image.Arch, n.Image.Release, strings.Join(zones, ", ")))
				continue
			}
			for _, be := range bootimages.Errors(err) {
				if be.Zone == "" || be.Zone == m.Zone {
					c.event(m.MS, corev1.EventTypeWarning, be.Reason, fmt.Sprintf("importing RHCOS %s (%s, %s): %v", n.Image.RHCOS, n.Image.Stream, n.Image.Arch, be))
				}
			}
		}
		c.wake()
	}()
}

func (c *Controller) importImage(ctx context.Context, ic cloud.ImageClient, n *bootimages.Need, zones []string) error {
	src, err := c.o.Source(n.Image, "")
	if err != nil {
		return err
	}
	if c.o.Cloud.(cloud.ImageCloud).BootImageMirrorFile(n.Image.File) != n.Image.File {
		// a prepared image: its MD5 is the mirror's
		if src.MD5, err = bootimages.FetchMD5(ctx, nil, src.URL); err != nil {
			return &cloud.BootImageError{Reason: ReasonMirrorUnreadable, Err: err}
		}
	}
	_, err = ic.ImportBootImage(ctx, c.o.ClusterID, src, zones)
	return err
}

// follow moves a MachineSet to target.
func (c *Controller) follow(ctx context.Context, m *bootimages.MachineSet, target *cloud.BootImage, img *bootimages.Image) {
	from := m.Ref
	if err := bootimages.SetImage(ctx, c.client, c.o.Options, m, target.Ref); err != nil {
		c.o.Log.Error(err, "moving a MachineSet to the release's boot image", "machineset", m.Key())
		c.event(m.MS, corev1.EventTypeWarning, ReasonUpdateFailed, fmt.Sprintf("could not move to %s: %v", target.Ref, err))
		return
	}
	msg := fmt.Sprintf("boot image %s -> %s: RHCOS %s of OpenShift %s (%s, %s); new Machines boot it, existing ones are not replaced", from, target.Ref, target.RHCOS, img.Release, m.Stream, m.Arch)
	c.o.Log.Info("MachineSet follows the release's boot image", "machineset", m.Key(), "from", from, "to", target.Ref)
	c.event(m.MS, corev1.EventTypeNormal, ReasonUpdated, msg)
	c.condition(ctx, m, corev1.ConditionTrue, ReasonCurrent, fmt.Sprintf("boots %s, RHCOS %s of OpenShift %s (%s, %s)", target.Ref, target.RHCOS, img.Release, m.Stream, m.Arch))
}

// prune deletes the provider's images no one names, after PruneAfter.
func (c *Controller) prune(ctx context.Context, ic cloud.ImageClient, images []cloud.BootImage, refs []bootimages.Reference, sets []*bootimages.MachineSet) {
	if c.o.PruneAfter <= 0 || bootimages.Unreadable(refs) {
		return
	}
	now := c.o.Now()
	unused := bootimages.Unreferenced(images, refs, sets)
	c.mu.Lock()
	seen := map[string]bool{}
	var due []cloud.BootImage
	for _, im := range unused {
		seen[im.ID] = true
		since, ok := c.unused[im.ID]
		if !ok {
			c.unused[im.ID] = now
			continue
		}
		if now.Sub(since) >= c.o.PruneAfter {
			due = append(due, im)
		}
	}
	for _, im := range images {
		if !seen[im.ID] {
			delete(c.unused, im.ID) // named again: its grace starts over
		}
	}
	c.mu.Unlock()
	for _, im := range due {
		if err := ic.DeleteBootImage(ctx, c.o.ClusterID, im); err != nil {
			c.o.Log.Error(err, "pruning a boot image", "image", im.Ref, "zones", im.Zones)
			continue
		}
		c.mu.Lock()
		delete(c.unused, im.ID)
		c.mu.Unlock()
		pruned.WithLabelValues(c.o.Cloud.Name()).Inc()
		c.o.Log.Info("pruned a boot image no MachineSet or Machine names", "image", im.Ref, "id", im.ID, "zones", im.Zones, "rhcos", im.RHCOS)
		if c.recorder != nil {
			ev := c.namespaceRef()
			c.recorder.Eventf(ev, corev1.EventTypeNormal, ReasonPruned, "deleted boot image %s (RHCOS %s, %s, %s) in %s: no MachineSet or Machine named it for %s", im.Ref, im.RHCOS, im.Stream, im.Arch, strings.Join(im.Zones, ", "), c.o.PruneAfter)
		}
	}
}

// recordSkew writes the oldest boot image into MachineConfiguration cluster
// once every MachineSet boots one the provider knows.
func (c *Controller) recordSkew(ctx context.Context, states []*bootimages.MachineSet, images []cloud.BootImage) {
	oldest, why := bootimages.OldestBootImage(states, images)
	if oldest == "" {
		c.o.Log.V(1).Info("boot-image skew not recorded", "why", why)
		return
	}
	rec, err := bootimages.ReadSkewRecord(ctx, c.reader)
	if err != nil {
		c.o.Log.Error(err, "reading MachineConfiguration cluster")
		return
	}
	wrote, err := bootimages.WriteSkewRecord(ctx, c.client, rec, oldest)
	if err != nil {
		c.o.Log.Error(err, "recording the boot-image skew")
		return
	}
	if wrote {
		c.o.Log.Info("recorded the oldest boot image in MachineConfiguration cluster", "rhcosVersion", oldest, "was", rec)
		if c.recorder != nil {
			ev := c.namespaceRef()
			c.recorder.Eventf(ev, corev1.EventTypeNormal, ReasonSkewRecorded, "MachineConfiguration cluster: spec.bootImageSkewEnforcement Manual, rhcosVersion %s (the oldest boot image of the MachineSets)", oldest)
		}
	}
}

func (c *Controller) event(ms *machinev1.MachineSet, typ, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(ms, typ, reason, msg)
	}
}

// condition sets BootImageCurrent on a MachineSet, with a patch of its
// status (the MachineSet controller writes the rest).
func (c *Controller) condition(ctx context.Context, m *bootimages.MachineSet, status corev1.ConditionStatus, reason, msg string) {
	ms := m.MS
	want := machinev1.Condition{Type: ConditionType, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(c.o.Now())}
	if status == corev1.ConditionFalse {
		want.Severity = machinev1.ConditionSeverityWarning
	}
	i := slices.IndexFunc(ms.Status.Conditions, func(x machinev1.Condition) bool { return x.Type == ConditionType })
	base := ms.DeepCopy()
	if i >= 0 {
		have := ms.Status.Conditions[i]
		if have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			return
		}
		if have.Status == want.Status {
			want.LastTransitionTime = have.LastTransitionTime
		}
		ms.Status.Conditions[i] = want
	} else {
		ms.Status.Conditions = append(ms.Status.Conditions, want)
	}
	if err := c.client.Status().Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		c.o.Log.Error(err, "setting the condition", "machineset", m.Key(), "condition", ConditionType)
	}
}

// namespaceRef is what events about no MachineSet (a pruned image, the
// skew record) are about: the namespace, with the event in it, where the
// controllers may write events.
func (c *Controller) namespaceRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Namespace", APIVersion: "v1", Name: c.o.Namespace, Namespace: c.o.Namespace}
}
