package deployer

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// The manager's flags the deployer sets itself: one table, reservedFlags,
// says for each why no key of ManagerConfigMap may set it and what the
// deployer renders into the machine-controller's arguments (in the table's
// order, before the ConfigMap's flags). Its last rows are OwnFlags: the
// deployer's own options, which it hands on to the manager as they are.
// ReservedManagerFlags, the refusal of a ConfigMap naming one, the note the
// condition adds while it does, the deployer's command-line flags and their
// environment defaults all come from here: a flag reserved is rendered,
// refused and documented at once.

// OwnFlag is a flag of the manager that only the deployer's own option of
// the same name sets (its flag, or its environment variable: what an OLM
// Subscription's spec.config.env sets), never a namespace's ConfigMap: its
// value decides where the manager's credentials go or what the cluster's
// nodes boot, and whoever may write a ConfigMap of the namespace must not
// choose either.
type OwnFlag struct {
	// Name is the flag's, of the deployer and of the manager, without
	// the dashes.
	Name string
	// Env is the deployer's environment variable its flag defaults to.
	Env string
	// Usage is the deployer's flag's help.
	Usage string
	// decides says what the value decides: why it is reserved.
	decides string
	// with and without say what the manager does instead while a
	// ConfigMap names the key: with the deployer's option set, and
	// without. Neither quotes a value.
	with, without string
}

// OwnFlags are the deployer's options it hands the manager as flags.
//
// Of the boot image controller's flags only the mirror is here: it decides
// WHAT every new node boots (on Exoscale the image's MD5 is read from the
// mirror itself, so its writer chooses the image outright; on cloudscale.ch
// the sha256 is checked against the cluster's own coreos-bootimages, so
// there it decides whether imports work). The others stay keys of the
// ConfigMap: they decide how the controller acts on images it imported from
// this mirror and checked, never which: --boot-images-follow-all which
// MachineSets without an owner reference move to the release's image (a
// MachineSet labelled false stays), --boot-images-record-skew whether the
// oldest image the MachineSets actually boot is recorded (computed, never a
// value of the ConfigMap), --boot-images-prune-after when the controller's
// own images no MachineSet or Machine names, nor any MachineSet wants, are
// deleted, --boot-images-interval how often it looks. At worst they cost
// imports again or a scale-up's pivot, as sync-period or cloud-api-qps
// cost time.
var OwnFlags = []OwnFlag{
	{
		Name: "cloudscale-api-url", Env: "CLOUDSCALE_API_URL",
		Usage:   "cloudscale.ch API base URL handed to the provider (default $CLOUDSCALE_API_URL, else the real API); the one place to set it: the default credentials and every server's user data go there",
		decides: "the manager sends its default credentials and every server's user data there",
		with:    "the manager calls the cloudscale.ch API at the one the deployer's --cloudscale-api-url names, never the ConfigMap's cloudscale-api-url",
		without: "the manager calls the cloudscale.ch API at the real one (the deployer's --cloudscale-api-url names no other), never the ConfigMap's cloudscale-api-url",
	},
	{
		Name: "exoscale-api-endpoint", Env: "EXOSCALE_API_ENDPOINT",
		Usage:   "Exoscale API endpoint handed to the provider, whose zone list names every zone's (default $EXOSCALE_API_ENDPOINT, else the real API's); the one place to set it: the default credentials and every instance's user data go there",
		decides: "the manager sends its default credentials and every instance's user data there",
		with:    "the manager calls the Exoscale API at the one the deployer's --exoscale-api-endpoint names, never the ConfigMap's exoscale-api-endpoint",
		without: "the manager calls the Exoscale API at the real one (the deployer's --exoscale-api-endpoint names no other), never the ConfigMap's exoscale-api-endpoint",
	},
	{
		Name: "boot-images-mirror", Env: "BOOT_IMAGES_MIRROR",
		Usage:   "turns the provider's boot image controller on: the base URL of the mirror the release's RHCOS images are imported from, handed to the provider (default $BOOT_IMAGES_MIRROR, else off; docs/boot-images.md); the one place to set it: every new node boots what the mirror serves",
		decides: "every new node boots the image the mirror serves (on Exoscale checked only against the mirror's own .md5)",
		with:    "the boot image controller imports from the mirror the deployer's --boot-images-mirror names, never from the ConfigMap's boot-images-mirror",
		without: "the boot image controller stays off (the deployer's --boot-images-mirror names no mirror), whatever the ConfigMap's boot-images-mirror says",
	},
}

// reservedFlag is a flag of the manager no ConfigMap may set.
type reservedFlag struct {
	name string
	// why no ConfigMap may set it; the condition quotes it
	why string
	// value is what the deployer renders ("": nothing, the manager's
	// default); nil for a flag it always leaves at the default
	value func(Spec) string
}

// reservedFlags, in the order the deployer renders them: the arguments
// are those of every release before the table, so that it rolls nothing.
var reservedFlags = append([]reservedFlag{
	{"namespace", "the deployer's namespace, where the Machines, their secrets and the lease are",
		func(s Spec) string { return s.Namespace }},
	{"leader-elect", "always on: a rollout starts the new pod before the old one ends, and only one may act",
		func(Spec) string { return "true" }},
	{"metrics-bind-address", "the kube-rbac-proxy sidecar publishes the metrics from " + machineMetricsAddr,
		func(Spec) string { return machineMetricsAddr }},
	{"health-probe-bind-address", "the probes and the NetworkPolicy use port 9440",
		func(Spec) string { return fmt.Sprintf(":%d", machineHealthPort) }},
	{"default-credentials-secret", "the deployer's --credentials-secret",
		func(s Spec) string { return s.TokenSecret }},
	{"cloud", "the deployer's --cloud, after which the Deployment, its RBAC and lease are named",
		func(s Spec) string { return s.Cloud }},
	{"cluster-id", "the Infrastructure's infrastructureName, the cluster's identity: the provider acts for no other cluster",
		func(s Spec) string { return s.ClusterID }},
	{"legacy-cluster-ids", "the Infrastructure's annotation " + clusterid.LegacyAnnotation + ", which only cluster admins may write: a cluster ID it owns besides is declared there",
		func(s Spec) string { return strings.Join(s.LegacyClusterIDs, ",") }},
	{"leader-election-namespace", "a lease elsewhere would let the old and the new pod lead at once during the rollout", nil},
	{"leader-election-id", "a lease of another name would let the old and the new pod lead at once during the rollout", nil},
	{"kubeconfig", "the controllers use their service account", nil},
}, ownRows()...)

// ownRows are OwnFlags as rows of reservedFlags.
func ownRows() []reservedFlag {
	var rows []reservedFlag
	for _, f := range OwnFlags {
		rows = append(rows, reservedFlag{
			name: f.Name,
			why: f.decides + ", so only the deployer's own --" + f.Name + " (or its environment " + f.Env +
				") names it (docs/operations.md, Settings on a cluster); whoever may write this ConfigMap must not choose it",
			value: func(s Spec) string { return s.Own[f.Name] },
		})
	}
	return rows
}

// ReservedManagerFlags are the manager's flags the deployer sets itself
// (or keeps at their defaults), by name, and why a ConfigMap cannot: each
// is tied to something else the deployer or config/ sets up, or is the
// deployer's own option (OwnFlags). Every other flag of the manager can be
// set.
var ReservedManagerFlags = func() map[string]string {
	m := map[string]string{}
	for _, f := range reservedFlags {
		m[f.name] = f.why
	}
	return m
}()

// reservedArgs are the manager's arguments the deployer renders from s.
func reservedArgs(s Spec) []string {
	var args []string
	for _, f := range reservedFlags {
		if f.value == nil {
			continue
		}
		if v := f.value(s); v != "" {
			args = append(args, "--"+f.name+"="+v)
		}
	}
	return args
}

// ownNote says, for each key of OwnFlags the ConfigMap cm sets, what the
// manager does instead (own: the deployer's options): as long as the key
// is there, the condition says where the manager's calls go and where the
// boot images come from ("" for none).
func ownNote(cm *corev1.ConfigMap, own map[string]string) string {
	if cm == nil {
		return ""
	}
	note := ""
	for _, f := range OwnFlags {
		if _, set := cm.Data[f.Name]; !set {
			continue
		}
		instead := f.without
		if own[f.Name] != "" {
			instead = f.with
		}
		note += "; " + instead
	}
	return note
}

// checkOwn refuses own options that are not OwnFlags, and a provider
// environment variable that names an OwnFlag's Env beside the option: one
// place each.
func checkOwn(own map[string]string, env []corev1.EnvVar) error {
	for _, name := range slices.Sorted(maps.Keys(own)) {
		if !slices.ContainsFunc(OwnFlags, func(f OwnFlag) bool { return f.Name == name }) {
			return fmt.Errorf("--%s is no option the deployer hands the manager (%s)", name, ownNames())
		}
	}
	for _, e := range env {
		for _, f := range OwnFlags {
			if e.Name == f.Env && own[f.Name] != "" {
				return fmt.Errorf("the provider's environment names %s, and so does the option --%s: give one", e.Name, f.Name)
			}
		}
	}
	return nil
}

// ownNames names OwnFlags as flags: "--a, --b".
func ownNames() string {
	var names []string
	for _, f := range OwnFlags {
		names = append(names, f.Name)
	}
	return "--" + strings.Join(names, ", --")
}
