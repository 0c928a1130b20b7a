package bootimages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// Boot-image skew (OpenShift 4.22 on): the machine-config-operator holds a
// cluster back (machine-config Upgradeable=False, ClusterBootImageSkewError)
// when its oldest boot image is too old for the next release. On platforms
// External and None it cannot see the boot images and takes the install
// version for theirs, unless MachineConfiguration cluster records them in
// spec.bootImageSkewEnforcement (openshift/api operator/v1,
// types_machineconfiguration.go): Manual with the RHCOS (or OCP) version of
// the oldest boot image, or None.

// MachineConfigurationName is the cluster's MachineConfiguration.
const MachineConfigurationName = "cluster"

// SkewErrorReason is the reason of machine-config's Upgradeable=False when
// the boot images are too old (machine-config-operator, main branch).
const SkewErrorReason = "ClusterBootImageSkewError"

// rhcosVersionPattern is the format the MachineConfiguration's validation
// takes for manual.rhcosVersion.
var rhcosVersionPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+\.([0-9]{8}|[0-9]{12})-[0-9]+$`)

// buildOf orders RHCOS versions by their build, across both version
// schemes (9.6.20250523-0 and the older 418.94.202410090804-0): the build
// date, then its number. The MCO compares major.minor within one scheme
// (main branch, pkg/controller/bootimage/marketplace/marketplace.go); the
// oldest boot image is the one built first in either.
func buildOf(v string) (date string, n int, ok bool) {
	if !rhcosVersionPattern.MatchString(v) {
		return "", 0, false
	}
	parts := strings.SplitN(v, ".", 3)
	stamp, num, _ := strings.Cut(parts[2], "-")
	date = (stamp + "0000")[:12]
	n, _ = strconv.Atoi(num)
	return date, n, true
}

// OlderRHCOS reports whether RHCOS version a was built before b.
func OlderRHCOS(a, b string) bool {
	da, na, _ := buildOf(a)
	db, nb, _ := buildOf(b)
	if da != db {
		return da < db
	}
	return na < nb
}

// OldestBootImage is the RHCOS version of the oldest boot image the
// MachineSets boot, if every one boots an image whose RHCOS the provider
// knows (one it imported); why says which does not otherwise.
func OldestBootImage(sets []*MachineSet, images []cloud.BootImage) (oldest, why string) {
	if len(sets) == 0 {
		return "", "there is no MachineSet"
	}
	for _, m := range sets {
		im := Boots(images, m.Ref, m.Zone)
		if im == nil {
			return "", fmt.Sprintf("MachineSet %s boots %q, which the provider did not import: its RHCOS version is unknown", m.Key(), m.Ref)
		}
		if _, _, ok := buildOf(im.RHCOS); !ok {
			return "", fmt.Sprintf("MachineSet %s boots %s, whose RHCOS version %q is not one the MachineConfiguration takes", m.Key(), im.Ref, im.RHCOS)
		}
		if oldest == "" || OlderRHCOS(im.RHCOS, oldest) {
			oldest = im.RHCOS
		}
	}
	return oldest, ""
}

// SkewRecord is the cluster's record of its boot images.
type SkewRecord struct {
	// Found: the MachineConfiguration exists (the API has it).
	Found bool
	// Mode is spec.bootImageSkewEnforcement.mode ("" unset), RHCOS and OCP
	// its manual values.
	Mode, RHCOS, OCP string
}

// ReadSkewRecord reads MachineConfiguration cluster.
// It reads it unstructured, so that any client can (adopt's, the
// switch's): a cluster without the kind has no record.
func ReadSkewRecord(ctx context.Context, r client.Reader) (SkewRecord, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(operatorv1.GroupVersion.WithKind("MachineConfiguration"))
	err := r.Get(ctx, types.NamespacedName{Name: MachineConfigurationName}, u)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return SkewRecord{}, nil
	case err != nil:
		return SkewRecord{}, err
	}
	str := func(path ...string) string {
		v, _, _ := unstructured.NestedString(u.Object, append([]string{"spec", "bootImageSkewEnforcement"}, path...)...)
		return v
	}
	return SkewRecord{Found: true, Mode: str("mode"), RHCOS: str("manual", "rhcosVersion"), OCP: str("manual", "ocpVersion")}, nil
}

// NewMachineConfiguration is MachineConfiguration cluster as a cluster has
// it before anyone records a boot image (the local cluster and tests make
// it): managed, nothing else set.
func NewMachineConfiguration() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"managementState": "Managed"}}}
	u.SetGroupVersionKind(operatorv1.GroupVersion.WithKind("MachineConfiguration"))
	u.SetName(MachineConfigurationName)
	return u
}

// RecordPatch is the merge patch that records rhcos as the cluster's
// oldest boot image.
func RecordPatch(rhcos string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the placeholder of ClearCommand stays readable
	_ = enc.Encode(map[string]any{"spec": map[string]any{"bootImageSkewEnforcement": map[string]any{
		"mode": string(operatorv1.BootImageSkewEnforcementConfigModeManual),
		"manual": map[string]any{
			"mode": string(operatorv1.ClusterBootImageSpecModeRHCOSVersion), "rhcosVersion": rhcos,
		},
	}}})
	return bytes.TrimSpace(b.Bytes())
}

// WriteSkewRecord records rhcos unless the record says so already, or the
// user turned enforcement off (mode None, which the provider leaves). It
// returns whether it wrote.
func WriteSkewRecord(ctx context.Context, c client.Client, rec SkewRecord, rhcos string) (bool, error) {
	if !rec.Found || rec.Mode == string(operatorv1.BootImageSkewEnforcementConfigModeNone) {
		return false, nil
	}
	if rec.Mode == string(operatorv1.BootImageSkewEnforcementConfigModeManual) && rec.RHCOS == rhcos && rec.OCP == "" {
		return false, nil
	}
	if !rhcosVersionPattern.MatchString(rhcos) {
		return false, fmt.Errorf("RHCOS version %q is not in the format the MachineConfiguration takes", rhcos)
	}
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(operatorv1.GroupVersion.WithKind("MachineConfiguration"))
	mc.SetName(MachineConfigurationName)
	if err := c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, RecordPatch(rhcos))); err != nil {
		return false, fmt.Errorf("recording the boot image in MachineConfiguration %s: %w", MachineConfigurationName, err)
	}
	return true, nil
}

// SkewLimitBefore is the release before which an install's boot image is
// too old for the skew enforcement of 4.22: a cluster installed earlier,
// without a record, is held back.
var SkewLimitBefore = [2]int{4, 13}

// HeldBack says why the cluster would be held back by boot-image skew
// enforcement ("" when it would not): it was installed before
// SkewLimitBefore (the oldest entry of the ClusterVersion's history) and
// MachineConfiguration cluster records no boot image. oldest, when known,
// goes into the command printed.
func HeldBack(ctx context.Context, r client.Reader, oldest string) (string, error) {
	cv := &unstructured.Unstructured{}
	cv.SetGroupVersionKind(configv1.GroupVersion.WithKind("ClusterVersion"))
	if err := r.Get(ctx, types.NamespacedName{Name: "version"}, cv); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return "", nil
		}
		return "", err
	}
	// the history is newest first: its last entry is the install
	h, _, _ := unstructured.NestedSlice(cv.Object, "status", "history")
	if len(h) == 0 {
		return "", nil
	}
	last, _ := h[len(h)-1].(map[string]any)
	installed, _ := last["version"].(string)
	maj, min, ok := majorMinor(installed)
	if !ok || maj > SkewLimitBefore[0] || (maj == SkewLimitBefore[0] && min >= SkewLimitBefore[1]) {
		return "", nil
	}
	rec, err := ReadSkewRecord(ctx, r)
	if err != nil {
		return "", err
	}
	if rec.Mode != "" {
		return "", nil
	}
	return fmt.Sprintf("the cluster was installed with OpenShift %s, before %d.%d, and MachineConfiguration %s records no boot image: "+
		"from OpenShift 4.22 the machine-config-operator takes the install version for the boot images' and holds the cluster back "+
		"(machine-config Upgradeable=False, %s). Record the oldest boot image the MachineSets boot:\n  %s\n"+
		"(or let the provider record it: docs/boot-images.md)",
		installed, SkewLimitBefore[0], SkewLimitBefore[1], MachineConfigurationName, SkewErrorReason, ClearCommand(oldest)), nil
}

// ClearCommand is the command that records oldest (a placeholder when
// unknown) as the cluster's boot image.
func ClearCommand(oldest string) string {
	if oldest == "" {
		oldest = "<RHCOS version of the oldest boot image, e.g. 9.6.20250523-0>"
	}
	return fmt.Sprintf("oc patch machineconfiguration %s --type merge -p '%s'", MachineConfigurationName, RecordPatch(oldest))
}

func majorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	return maj, min, err1 == nil && err2 == nil
}
