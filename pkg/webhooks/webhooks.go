// Package webhooks holds the admission webhooks for Machines and MachineSets
// whose provider spec is the cloud's: a defaulting (mutating) one that writes
// the defaulted provider spec back, and a validating one that refuses what
// the actuator would fail the Machine for, naming the field.
//
// Both use the cloud's ParseSpec, the very defaulting and validation the
// actuator runs (for cloudscale.ch, api/cloudscale/v1beta1), so a spec the
// webhook admits is one the actuator accepts, and the other way round.
//
// Objects whose provider spec is another cloud's, or that have none, pass
// untouched: other providers' Machines may live in the same namespace. A
// spec without a kind is taken to be the cloud's, as the actuator and the
// capacity publisher take it; defaulting then sets the kind.
//
// The manifests that register the webhooks with the API server, and how the
// OpenShift service CA provides their certificates, are in docs/webhook.md.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/cloud"
)

// The paths the webhooks are served on; the webhook configurations in
// docs/webhook.md name them.
const (
	MutateMachinePath      = "/mutate-machine-openshift-io-v1beta1-machine"
	ValidateMachinePath    = "/validate-machine-openshift-io-v1beta1-machine"
	MutateMachineSetPath   = "/mutate-machine-openshift-io-v1beta1-machineset"
	ValidateMachineSetPath = "/validate-machine-openshift-io-v1beta1-machineset"
)

// clusterIDDetail says what the cluster label is for, in the actuator's
// words (pkg/actuator/scope.go), so that the webhook and the Machine's
// failure read alike.
const clusterIDDetail = "the cluster's infrastructure name, which tags the Machine's server"

// Register registers the four webhooks on srv; the validating ones hold
// the cluster label to the cluster's identity id.
func Register(srv webhook.Server, c cloud.Cloud, id *Identity) {
	srv.Register(MutateMachinePath, &webhook.Admission{Handler: NewDefaulter(c, Machines)})
	srv.Register(ValidateMachinePath, &webhook.Admission{Handler: NewValidator(c, Machines, id)})
	srv.Register(MutateMachineSetPath, &webhook.Admission{Handler: NewDefaulter(c, MachineSets)})
	srv.Register(ValidateMachineSetPath, &webhook.Admission{Handler: NewValidator(c, MachineSets, id)})
}

// Resource is Machines or MachineSets, as the webhooks see them.
type Resource struct {
	groupKind schema.GroupKind
	// specPath is where the provider spec is, for field errors; patchPath
	// is the same as a JSON pointer, for patches.
	specPath  *field.Path
	patchPath string
	// labelsPath is where the labels of the Machine are.
	labelsPath *field.Path
	decode     func(raw []byte) (object, error)
}

// object is what the webhooks look at in a Machine or a MachineSet.
type object struct {
	name     string
	deleting bool
	// machineName is the name of the Machine, or for a MachineSet (or a
	// generateName) one name of the Machines it makes; namePath is the
	// field it comes from.
	machineName string
	namePath    *field.Path
	// labels of the Machine: a MachineSet's are those of its template.
	labels       map[string]string
	providerSpec machinev1.ProviderSpec
}

var (
	// Machines carry the provider spec at spec.providerSpec.value.
	Machines = Resource{
		groupKind:  schema.GroupKind{Group: machinev1.GroupName, Kind: "Machine"},
		specPath:   field.NewPath("spec", "providerSpec", "value"),
		patchPath:  "/spec/providerSpec/value",
		labelsPath: field.NewPath("metadata", "labels"),
		decode: func(raw []byte) (object, error) {
			var m machinev1.Machine
			if err := json.Unmarshal(raw, &m); err != nil {
				return object{}, fmt.Errorf("decoding the Machine: %w", err)
			}
			o := object{name: nameOf(m.ObjectMeta), deleting: m.DeletionTimestamp != nil, labels: m.Labels, providerSpec: m.Spec.ProviderSpec}
			o.machineName, o.namePath = m.Name, field.NewPath("metadata", "name")
			if m.Name == "" {
				o.machineName, o.namePath = generatedName(m.GenerateName), field.NewPath("metadata", "generateName")
			}
			return o, nil
		},
	}
	// MachineSets carry it in their Machine template, at
	// spec.template.spec.providerSpec.value.
	MachineSets = Resource{
		groupKind:  schema.GroupKind{Group: machinev1.GroupName, Kind: "MachineSet"},
		specPath:   field.NewPath("spec", "template", "spec", "providerSpec", "value"),
		patchPath:  "/spec/template/spec/providerSpec/value",
		labelsPath: field.NewPath("spec", "template", "metadata", "labels"),
		decode: func(raw []byte) (object, error) {
			var ms machinev1.MachineSet
			if err := json.Unmarshal(raw, &ms); err != nil {
				return object{}, fmt.Errorf("decoding the MachineSet: %w", err)
			}
			t := ms.Spec.Template
			o := object{name: nameOf(ms.ObjectMeta), deleting: ms.DeletionTimestamp != nil, labels: t.Labels, providerSpec: t.Spec.ProviderSpec}
			// The MachineSet controller names its Machines <machineset>-<random>.
			o.namePath = field.NewPath("metadata", "name")
			msName := ms.Name
			if msName == "" {
				msName, o.namePath = generatedName(ms.GenerateName), field.NewPath("metadata", "generateName")
			}
			o.machineName = generatedName(msName + "-")
			return o, nil
		},
	}
)

func nameOf(m metav1.ObjectMeta) string {
	if m.Name == "" {
		return m.GenerateName
	}
	return m.Name
}

// ours says whether a provider spec is the cloud's: of its kind, or of no
// kind. Without a value it is nobody's.
func ours(c cloud.Cloud, ps machinev1.ProviderSpec) bool {
	if ps.Value == nil || len(ps.Value.Raw) == 0 {
		return false
	}
	var meta struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(ps.Value.Raw, &meta); err != nil {
		// Not even a kind we can read: ParseSpec says what is wrong.
		return true
	}
	return meta.Kind == "" || meta.Kind == c.SpecKind()
}

func acted(op admissionv1.Operation) bool {
	return op == admissionv1.Create || op == admissionv1.Update
}

// Validator is the validating webhook for one Resource.
type Validator struct {
	cloud cloud.Cloud
	res   Resource
	id    *Identity
}

// NewValidator returns the validating webhook for r, for the cluster whose
// identity is id.
func NewValidator(c cloud.Cloud, r Resource, id *Identity) *Validator {
	return &Validator{cloud: c, res: r, id: id}
}

// Handle admits an object whose provider spec is valid and whose Machine
// would carry the cluster label, and refuses any other with a field error
// for each problem.
//
// Updates are held to the same rules, with two exceptions that keep
// controllers from getting stuck on objects created before the webhook (or
// while it was down): an object being deleted is always admitted (its
// finalizers must come off), and so is an update that leaves the provider
// spec and the cluster label as they were (it gets the errors as warnings).
//
// Changes of fields the cloud cannot change on an existing server (zone,
// flavor, image, ...) are deliberately not refused here: the actuator
// reports them on the Machine (condition SpecInSync) and the Machine must
// be replaced, while on a MachineSet they are how new Machines get a new
// spec.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !acted(req.Operation) {
		return admission.Allowed("")
	}
	obj, err := v.res.decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !ours(v.cloud, obj.providerSpec) {
		return admission.Allowed("not a " + v.cloud.SpecKind())
	}
	if obj.deleting {
		return admission.Allowed("being deleted")
	}
	errs, spec := v.validate(ctx, obj)
	warnings := unknownFieldWarnings(v.cloud, obj.providerSpec, spec, v.res.specPath)
	if len(errs) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	if req.Operation == admissionv1.Update {
		if old, err := v.res.decode(req.OldObject.Raw); err == nil && sameSpec(old, obj) {
			for _, e := range errs {
				warnings = append(warnings, e.Error())
			}
			return admission.Allowed("the provider spec was invalid before and is unchanged").WithWarnings(warnings...)
		}
	}
	status := apierrors.NewInvalid(v.res.groupKind, obj.name, errs).Status()
	resp := admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	return resp.WithWarnings(warnings...)
}

// validate reports what the actuator would fail the Machine for before
// asking the cloud anything: the cluster label, the provider spec, then
// whether the Machine's name can be its server's hostname. It returns the
// parsed spec too, nil when invalid.
func (v *Validator) validate(ctx context.Context, obj object) (field.ErrorList, cloud.Spec) {
	var errs field.ErrorList
	labelPath := v.res.labelsPath.Key(actuator.ClusterIDLabel)
	_, known := v.id.IDs()
	switch label := obj.labels[actuator.ClusterIDLabel]; {
	case !known:
		errs = append(errs, field.InternalError(labelPath, errors.New("the webhook does not know the cluster's identity yet (the Infrastructure's infrastructureName): try again in a moment")))
	case label == "":
		cluster, _ := v.id.Get()
		errs = append(errs, field.Required(labelPath, fmt.Sprintf("%s (%q)", clusterIDDetail, cluster)))
	default:
		// The cluster's own ID or a declared legacy one; refused in the
		// actuator's words (pkg/clusterid, NotOurs).
		if ids, ok := v.id.Owns(ctx, label); !ok {
			errs = append(errs, field.Invalid(labelPath, label, ids.NotOurs(label, v.res.groupKind.Kind)))
		}
	}
	spec, specErrs := v.cloud.ParseSpec(obj.providerSpec, v.res.specPath)
	errs = append(errs, specErrs...)
	return append(errs, hostnameErrors(obj, spec)...), spec
}

// sameSpec says whether an update leaves what validate looks at unchanged.
func sameSpec(old, cur object) bool {
	if old.labels[actuator.ClusterIDLabel] != cur.labels[actuator.ClusterIDLabel] {
		return false
	}
	var o, c any
	if old.providerSpec.Value == nil || cur.providerSpec.Value == nil {
		return old.providerSpec.Value == nil && cur.providerSpec.Value == nil
	}
	if json.Unmarshal(old.providerSpec.Value.Raw, &o) != nil || json.Unmarshal(cur.providerSpec.Value.Raw, &c) != nil {
		return string(old.providerSpec.Value.Raw) == string(cur.providerSpec.Value.Raw)
	}
	return reflect.DeepEqual(o, c)
}

// Defaulter is the defaulting webhook for one Resource.
type Defaulter struct {
	cloud cloud.Cloud
	res   Resource
}

// NewDefaulter returns the defaulting webhook for r.
func NewDefaulter(c cloud.Cloud, r Resource) *Defaulter { return &Defaulter{cloud: c, res: r} }

// Handle fills in the defaults of a valid provider spec, by a JSON patch of
// the members the spec leaves out or empty (for cloudscale.ch: apiVersion,
// kind, rootVolumeSizeGB, useIPV6, interfaces). It never rewrites a value
// the user gave and keeps members it does not know. An invalid spec is left
// as it is, for the validating webhook to refuse.
//
// The defaulted spec is the cloud's parsed Spec encoded as JSON: a cloud's
// Spec must encode as its provider spec (cloudscale.ch's embeds it).
func (d *Defaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	if !acted(req.Operation) {
		return admission.Allowed("")
	}
	obj, err := d.res.decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !ours(d.cloud, obj.providerSpec) {
		return admission.Allowed("not a " + d.cloud.SpecKind())
	}
	if obj.deleting {
		return admission.Allowed("being deleted")
	}
	spec, errs := d.cloud.ParseSpec(obj.providerSpec, d.res.specPath)
	if len(errs) > 0 {
		return admission.Allowed("invalid provider spec: left to the validating webhook")
	}
	defaulted, err := json.Marshal(spec)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encoding the defaulted provider spec: %w", err))
	}
	ops, err := fillIn(d.res.patchPath, obj.providerSpec.Value.Raw, defaulted, d.cloud.SpecKind())
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("defaulting the provider spec: %w", err))
	}
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("", ops...)
}

// fillIn returns the JSON patch operations that set, in the provider spec
// given at the JSON pointer at, each member of defaulted that given lacks
// or leaves empty.
func fillIn(at string, given, defaulted []byte, kind string) ([]jsonpatch.JsonPatchOperation, error) {
	var g, d map[string]any
	if err := json.Unmarshal(given, &g); err != nil || g == nil {
		return nil, fmt.Errorf("the provider spec is not a JSON object")
	}
	if err := json.Unmarshal(defaulted, &d); err != nil || d["kind"] != kind {
		return nil, fmt.Errorf("the cloud's parsed spec does not encode as a %s (got %.200s)", kind, defaulted)
	}
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ops []jsonpatch.JsonPatchOperation
	for _, k := range keys {
		gv, ok := g[k]
		if ok && (!empty(gv) || reflect.DeepEqual(gv, d[k])) {
			continue
		}
		// "add" replaces a member that is there (RFC 6902, 4.1).
		ops = append(ops, jsonpatch.NewOperation("add", at+"/"+escapePointer(k), d[k]))
	}
	return ops, nil
}

// empty is a JSON value that says nothing: null, "", 0, false, [] or {}.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case float64:
		return v == 0
	case bool:
		return !v
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
