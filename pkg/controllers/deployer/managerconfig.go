package deployer

// The manager's flags on a cluster. The deployer applies the controllers
// Deployment with forced ownership, so an edit of the machine-controller's
// arguments is set back at once; its knobs are set instead in the
// ConfigMap machine-api-provider-config of the namespace: each key a flag
// of `machine-api-provider manager` without the leading dashes, each value
// the flag's value.
//
//	oc -n openshift-machine-api create configmap machine-api-provider-config \
//	    --from-literal=cloud-api-qps=20 --from-literal=delete-orphans-after=1h
//
// The deployer hands the keys to the manager as --key=value after its own
// flags, so a change rolls the controllers (the pod template's arguments
// change). Before that it checks the whole command line with the manager's
// own flag parsing and checks (Options.CheckManagerArgs): an unknown key, a
// value the flag does not take, a combination the manager refuses to start
// with (--create-grace not above --cloud-api-timeout) or a flag the
// deployer sets itself (ReservedManagerFlags) is refused, with the
// condition ManagerConfigValid=False and a Warning event naming the key, on
// the ConfigMap and on the status ConfigMap; the controllers keep the
// configuration they run with, which the Deployment records in the
// annotation ManagerConfigAnnotation, as long as that passes the same
// checks: after an upgrade that dropped or changed a flag it may not, and
// then the manager runs with its defaults, which the condition says.
// Deleting the ConfigMap (or a key) returns the manager to its defaults.
//
// Whoever may write a ConfigMap of the namespace may not choose where the
// manager sends its credentials nor what the cluster's nodes boot: the
// cloud API endpoints and the boot image mirror are reserved, the
// deployer's own options (OwnFlags, reservedflags.go: --cloudscale-api-url,
// --exoscale-api-endpoint, --boot-images-mirror), and a Deployment that ran
// with one from the ConfigMap before is rolled without it, which the
// condition says. No value of the ConfigMap is ever
// quoted into the condition, an event or a log line: the messages name
// keys and the rule a value breaks.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// ManagerConfigMap holds the manager's flags, by name without "--".
	ManagerConfigMap = "machine-api-provider-config"
	// ManagerConfigAnnotation on the Deployment records the flags of
	// ManagerConfigMap it runs with, as a JSON object: what stays in force
	// while the ConfigMap holds something invalid.
	ManagerConfigAnnotation = "machine.appuio.io/manager-config"
	// ConditionManagerConfigValid is True when the manager runs with the
	// ConfigMap's flags (or there is none), False when they were refused.
	ConditionManagerConfigValid = "ManagerConfigValid"
	// ReasonConfigApplied and ReasonConfigInvalid are its reasons, and the
	// reasons of its events.
	ReasonConfigApplied = "ConfigApplied"
	ReasonConfigInvalid = "ConfigInvalid"
)

// ManagerConfig is the manager's flags a ConfigMap sets, by flag name.
type ManagerConfig map[string]string

// Args are the flags as arguments, in the order of their names.
func (c ManagerConfig) Args() []string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		args = append(args, "--"+k+"="+c[k])
	}
	return args
}

// String names the flags for messages, without their values:
// "--cloud-api-qps, --sync-period"; "no flags". A ConfigMap's value is
// never quoted into a condition, an event or a log line: one pasted in
// the wrong place may be a secret, and any may be hostile text.
func (c ManagerConfig) String() string {
	if len(c) == 0 {
		return "no flags"
	}
	return flagNames(slices.Sorted(maps.Keys(c)))
}

// flagNames names the keys as flags: "--a, --b".
func flagNames(keys []string) string {
	return "--" + strings.Join(keys, ", --")
}

// parseManagerConfig reads the flags of cm (nil: none) and checks them
// with check against the deployer's own arguments of the manager, base.
func parseManagerConfig(cm *corev1.ConfigMap, base []string, check func([]string) error) (ManagerConfig, error) {
	if cm == nil {
		return nil, nil
	}
	if len(cm.BinaryData) > 0 {
		return nil, fmt.Errorf("binaryData %s: the flags go under data", strings.Join(slices.Sorted(maps.Keys(cm.BinaryData)), ", "))
	}
	c := ManagerConfig{}
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if strings.HasPrefix(k, "-") {
			return nil, fmt.Errorf("key %q: the keys are the flags' names without the leading dashes (%s)", k, strings.TrimLeft(k, "-"))
		}
		if why, ok := ReservedManagerFlags[k]; ok {
			return nil, fmt.Errorf("key %q: the deployer sets --%s itself: %s", k, k, why)
		}
		c[k] = cm.Data[k]
	}
	if len(c) == 0 {
		return nil, nil
	}
	if check == nil {
		return nil, fmt.Errorf("this deployer cannot check the manager's flags (no CheckManagerArgs): none is taken")
	}
	if err := check(append(slices.Clone(base), c.Args()...)); err != nil {
		// by the keys alone: no value reaches a status, event or log
		// line (String); CheckManagerArgs names the key and the rule it
		// breaks, never the value
		return nil, fmt.Errorf("the manager would refuse %s: %w", c, err)
	}
	return c, nil
}

// appliedManagerConfig reads the flags a Deployment runs with from its
// annotations (none without the annotation), and names those it drops
// because the deployer sets them itself: a hand-edited annotation never
// smuggles a reserved flag in, and a flag reserved since the release that
// applied it (an API endpoint) is no longer kept.
func appliedManagerConfig(annotations map[string]string) (ManagerConfig, []string) {
	raw := annotations[ManagerConfigAnnotation]
	if raw == "" {
		return nil, nil
	}
	var c ManagerConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, nil
	}
	var dropped []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if _, reserved := ReservedManagerFlags[k]; reserved {
			delete(c, k)
			dropped = append(dropped, k)
		}
	}
	return c, dropped
}

// checkKept checks flags a Deployment ran with, as parseManagerConfig
// checks a ConfigMap's, against this release's manager: nil when they
// pass (or there are none).
func checkKept(kept ManagerConfig, base []string, check func([]string) error) error {
	if len(kept) == 0 {
		return nil
	}
	if check == nil {
		return fmt.Errorf("this deployer cannot check the manager's flags (no CheckManagerArgs)")
	}
	if err := check(append(slices.Clone(base), kept.Args()...)); err != nil {
		// by the keys alone, as parseManagerConfig
		return fmt.Errorf("the manager would refuse %s: %w", kept, err)
	}
	return nil
}

// managerConfig returns the manager's flags to apply and the
// ManagerConfigValid condition: the ConfigMap's when they pass, otherwise
// those the Deployment runs with (current, nil when there is none). It
// emits a Warning event on the ConfigMap when it refuses it.
func (r *Reconciler) managerConfig(ctx context.Context, base []string, current *appsv1.Deployment) (ManagerConfig, bool, string, string, error) {
	ns := r.opts.Namespace
	cm := &corev1.ConfigMap{}
	err := r.managerConfigReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ManagerConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return nil, false, "", "", fmt.Errorf("reading ConfigMap %s/%s: %w", ns, ManagerConfigMap, err)
	}
	c, perr := parseManagerConfig(cm, base, r.opts.CheckManagerArgs)
	if perr == nil {
		msg := fmt.Sprintf("the manager runs with its defaults: no ConfigMap %s/%s", ns, ManagerConfigMap)
		if cm != nil {
			msg = fmt.Sprintf("the manager runs with the flags of ConfigMap %s/%s: %s", ns, ManagerConfigMap, c)
		}
		return c, true, ReasonConfigApplied, msg, nil
	}
	var kept ManagerConfig
	var dropped []string
	if current != nil {
		kept, dropped = appliedManagerConfig(current.Annotations)
	}
	refused := fmt.Sprintf("ConfigMap %s/%s refused: %v", ns, ManagerConfigMap, perr)
	msg := fmt.Sprintf("%s; the manager keeps running with %s", refused, kept)
	if len(dropped) > 0 {
		// Said, not done silently: a cluster that set an API endpoint
		// in the ConfigMap before it was reserved now calls the one the
		// deployer names (the real API without).
		msg += fmt.Sprintf(", without %s, which it ran with before: the deployer sets it itself now", flagNames(dropped))
	}
	msg += ownNote(cm, r.opts.Own)
	_, conds, serr := readStatus(ctx, r.reader, ns)
	prev := meta.FindStatusCondition(conds, ConditionManagerConfigValid)
	fellBack := refused + "; the flags the manager ran with"
	switch kerr := checkKept(kept, base, r.opts.CheckManagerArgs); {
	case kerr != nil:
		// What ran before is checked as a new ConfigMap is: a release
		// that dropped or changed a flag would not start with it.
		msg = fmt.Sprintf("%s (%s) no longer pass either (%v): the manager runs with its defaults", fellBack, kept, kerr)
		kept = nil
	case len(kept) == 0 && prev != nil && strings.HasPrefix(prev.Message, fellBack):
		// The defaults it fell back to for this refusal: the condition
		// goes on saying why.
		msg = prev.Message
	}
	// once per refusal, where the admin looks: on the ConfigMap itself
	// (the status ConfigMap gets its own event with the condition)
	if serr != nil || prev == nil || prev.Message != msg {
		r.recorder.Event(cm, corev1.EventTypeWarning, ReasonConfigInvalid, msg)
	}
	return kept, false, ReasonConfigInvalid, msg, nil
}

// newConfigMapCache builds a cache holding the ConfigMap name of namespace
// ns alone, and adds it to mgr, which starts it before the controllers:
// the manager's own cache holds the images ConfigMap, and a field selector
// cannot name two.
func newConfigMapCache(mgr ctrl.Manager, ns, name string) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
		},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(egressCache{c}); err != nil {
		return nil, err
	}
	return c, nil
}
