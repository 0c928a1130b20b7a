package bootimages

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// The boot images as the alerts see them (config/prometheus):
// MachineSets booting an image older than their release's, and imports.
var (
	outdated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "machine_api_provider_machineset_boot_image_outdated",
		Help: "1 for each MachineSet of the provider (in the manager's namespace) that does not boot its release's RHCOS (stream and architecture), 0 for one that does, with the reason (NotFollowing, ImportInProgress, NoReleaseImage, Current); published by the boot image controller while it runs.",
	}, []string{"cloud", "machineset", "reason"})
	importsDone = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_boot_image_imports_total",
		Help: "Boot image imports the provider ended, by result (success, failure).",
	}, []string{"cloud", "result"})
	importFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_boot_image_import_failures_total",
		Help: "Failed boot image imports, by reason (ImportFailed, ChecksumMismatch, ZoneUnavailable, MirrorUnreadable), one per zone that failed.",
	}, []string{"cloud", "reason"})
	importSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "machine_api_provider_boot_image_import_duration_seconds",
		Help:    "Time a boot image import took, from its start until the image was usable in every zone (or failed).",
		Buckets: prometheus.ExponentialBuckets(5, 2, 12),
	}, []string{"cloud"})
	pruned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "machine_api_provider_boot_images_pruned_total",
		Help: "Boot images of the provider deleted because no MachineSet or Machine named them.",
	}, []string{"cloud"})
)

func init() {
	metrics.Registry.MustRegister(outdated, importsDone, importFailures, importSeconds, pruned)
}

// exportMetrics publishes, for each MachineSet of the provider, whether it
// boots its release's image.
func (c *Controller) exportMetrics(sets []*bootimages.MachineSet, images []cloud.BootImage) {
	name := c.o.Cloud.Name()
	outdated.DeletePartialMatch(prometheus.Labels{"cloud": name})
	for _, m := range sets {
		target := bootimages.Target(images, m)
		v, reason := 0.0, ReasonCurrent
		switch {
		case m.Want == nil:
			v, reason = 1, ReasonNoReleaseImage
		case target == nil:
			v, reason = 1, ReasonImporting
		case m.Ref != target.Ref && m.Ref != target.ID:
			v, reason = 1, ReasonNotFollowing
		}
		outdated.WithLabelValues(name, m.MS.Name, reason).Set(v)
	}
}
