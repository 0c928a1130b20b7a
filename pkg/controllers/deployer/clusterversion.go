package deployer

// Which release's controllers the Deployment runs: the cluster says so in
// its ClusterVersion (clusterversions.config.openshift.io/version). The
// images come from the images ConfigMap, which the cluster-version operator
// replaces during an upgrade somewhere between the start of the upgrade
// (status.desired changes at once) and its end (the history entry turns
// Completed). While an upgrade is under way the images may be either
// release's, so the deployer renders the older release's arguments: flags
// are only ever added between releases (Releases), so the older set is one
// both binaries take. Once the upgrade completes, the newer set follows
// (one more roll of the controllers, seconds).

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// ClusterVersionName is the one ClusterVersion of an OpenShift cluster.
const ClusterVersionName = "version"

// ConditionReleaseKnown is True when the cluster runs a release the
// deployer knows the controllers' flags of (Releases), False with the
// reason FitNewer, FitOlder or FitUnknown when it renders another's.
const ConditionReleaseKnown = "ReleaseKnown"

// renderVersion is the version whose controllers' arguments a cluster with
// ClusterVersion cv gets: the oldest of the desired version and every
// version of the history back to the last completed one; "" for none.
func renderVersion(cv *configv1.ClusterVersion) string {
	candidates := []string{cv.Status.Desired.Version}
	for _, h := range cv.Status.History {
		candidates = append(candidates, h.Version)
		if h.State == configv1.CompletedUpdate {
			break
		}
	}
	oldest, oldestRel := "", Release{}
	for _, v := range candidates {
		rel, ok := versionOf(v)
		if !ok {
			continue
		}
		if oldest == "" || rel.before(oldestRel) {
			oldest, oldestRel = v, rel
		}
	}
	return oldest
}

// clusterRelease reads the cluster's ClusterVersion and returns the
// release to render, how the cluster's version fits the known ones, and
// the version read ("" when none could be).
func (r *Reconciler) clusterRelease(ctx context.Context) (Release, Fit, string, error) {
	if !r.versionServed {
		rel, fit := ForVersion("")
		return rel, fit, "", nil
	}
	cv := &configv1.ClusterVersion{}
	err := r.egress.Get(ctx, types.NamespacedName{Name: ClusterVersionName}, cv)
	switch {
	case apierrors.IsNotFound(err):
		rel, fit := ForVersion("")
		return rel, fit, "", nil
	case err != nil:
		return Release{}, "", "", fmt.Errorf("reading ClusterVersion %s: %w", ClusterVersionName, err)
	}
	v := renderVersion(cv)
	rel, fit := ForVersion(v)
	return rel, fit, v, nil
}

// releaseCondition is the ReleaseKnown condition for a cluster of version
// v, rendered as rel.
func releaseCondition(rel Release, fit Fit, v string) (status bool, reason, message string) {
	switch fit {
	case FitKnown:
		support := "supported"
		if !rel.Supported {
			support = "known but not supported (supported: " + supportedRange() + ")"
		}
		return true, string(fit), fmt.Sprintf("OpenShift %s: %s, %s", v, rel.Describe(), support)
	case FitNewer:
		return false, string(fit), fmt.Sprintf(
			"OpenShift %s is newer than any release this provider knows (newest: %s): the controllers run with the flags of %s (%s); "+
				"upgrade the provider to a version that supports %s", v, Newest(), rel, rel.Describe(), v)
	case FitOlder:
		return false, string(fit), fmt.Sprintf(
			"OpenShift %s is older than any release this provider knows (oldest: %s): the controllers run with the flags of %s (%s); supported: %s",
			v, Releases[0], rel, rel.Describe(), supportedRange())
	default:
		return false, string(FitUnknown), fmt.Sprintf(
			"no ClusterVersion %q to read the OpenShift release from: the controllers run with the flags of the newest known release, %s (%s)",
			ClusterVersionName, rel, rel.Describe())
	}
}

// supportedRange is "4.16 to 5.0".
func supportedRange() string {
	var first, last Release
	for _, r := range Releases {
		if !r.Supported {
			continue
		}
		if first.Major == 0 {
			first = r
		}
		last = r
	}
	return first.String() + " to " + last.String()
}
