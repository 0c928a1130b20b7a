package bootimages

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// LoadRelease reads the release's boot images from the cluster.
func LoadRelease(ctx context.Context, r client.Reader) (*Release, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: ConfigMapName}, cm); err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", Namespace, ConfigMapName, err)
	}
	return ParseConfigMap(cm)
}

var md5Pattern = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)

// MirrorClient fetches checksum files from the mirror.
var MirrorClient = &http.Client{Timeout: time.Minute}

// FetchMD5 reads <url>.md5 from the mirror: md5sum's output ("<sum>  <file>")
// or the bare sum.
func FetchMD5(ctx context.Context, hc *http.Client, url string) (string, error) {
	if hc == nil {
		hc = MirrorClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+".md5", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading the MD5 of %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading the MD5 of %s: %s.md5 answered %s", url, url, resp.Status)
	}
	line, err := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	sum, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	if !md5Pattern.MatchString(sum) {
		return "", fmt.Errorf("%s.md5 holds no MD5 sum (want md5sum's output)", url)
	}
	return strings.ToLower(sum), nil
}

// SetImage points MachineSet m at ref, with an optimistic lock: a
// MachineSet someone changed meanwhile is left for the next pass. One with
// an owner reference is never changed.
func SetImage(ctx context.Context, c client.Client, o Options, m *MachineSet, ref string) error {
	if len(m.MS.OwnerReferences) > 0 {
		return fmt.Errorf("MachineSet %s has an owner reference: the provider does not change it", m.Key())
	}
	ic, err := o.imageCloud()
	if err != nil {
		return err
	}
	base := m.MS.DeepCopy()
	ps, err := ic.WithSpecImageRef(m.MS.Spec.Template.Spec.ProviderSpec, ref)
	if err != nil {
		return fmt.Errorf("MachineSet %s: %w", m.Key(), err)
	}
	m.MS.Spec.Template.Spec.ProviderSpec = ps
	if err := c.Patch(ctx, m.MS, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("MachineSet %s: %w", m.Key(), err)
	}
	m.Ref = ref
	return nil
}

// References are the images the MachineSets and Machines name.
func References(o Options, sets []machinev1.MachineSet, machines []machinev1.Machine) []Reference {
	ic, err := o.imageCloud()
	if err != nil {
		return nil
	}
	var out []Reference
	add := func(ps machinev1.ProviderSpec) {
		// a spec that cannot be read names an image we cannot tell: it
		// counts as naming every image (Zone ""), nothing is pruned
		ref, zone, err := ic.SpecImageRef(ps)
		if err != nil {
			out = append(out, Reference{Ref: "*"})
			return
		}
		if ref != "" {
			out = append(out, Reference{Ref: ref, Zone: zone})
		}
	}
	for i := range sets {
		add(sets[i].Spec.Template.Spec.ProviderSpec)
	}
	for i := range machines {
		add(machines[i].Spec.ProviderSpec)
	}
	return out
}

// Unreadable: some spec could not be read, so no image may be pruned.
func Unreadable(refs []Reference) bool {
	for _, r := range refs {
		if r.Ref == "*" {
			return true
		}
	}
	return false
}

// Errors walks err (joined or single) for the boot image errors in it.
func Errors(err error) []*cloud.BootImageError {
	var out []*cloud.BootImageError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var be *cloud.BootImageError
		if errors.As(e, &be) {
			out = append(out, be)
			return
		}
		out = append(out, &cloud.BootImageError{Reason: cloud.ReasonImportFailed, Err: e})
	}
	walk(err)
	return out
}
