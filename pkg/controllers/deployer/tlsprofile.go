package deployer

// The TLS flags of 4.22 and later (Release.TLSFlags). From release-4.22 the
// machineset-controller's webhook server takes --tls-min-version and
// --tls-cipher-suites (cmd/machineset/main.go), and the operator renders
// both from the cluster's APIServer for it and for the kube-rbac-proxy
// sidecars (pkg/operator/operator.go reads apiservers/cluster,
// pkg/operator/sync.go getTLSArgs and resolveTLSProfile, on the
// release-4.22 branch of openshift/machine-api-operator).
//
// The deployer renders them as the operator does, rather than leaving the
// machineset-controller to read the APIServer itself, because:
//   - the kube-rbac-proxy sidecars cannot read it: without the flags they
//     keep their own defaults, and only rendering gives them the cluster's
//     profile, as on a platform the operator manages;
//   - the machineset-controller reads it once, at start (pkg/tls/tls.go
//     ResolveTLSConfig; nothing in its main() watches it): a changed
//     profile would reach it only with its next restart. The deployer
//     watches the APIServer and re-renders, so a change rolls the pod;
//   - a failed read there is only logged, and the controller serves with
//     Go's defaults: a missing permission would weaken TLS in silence.
//     Here it is the deployer's one read of a cluster-scoped object,
//     limited by name in its ClusterRole, and a profile that cannot be
//     rendered is reported (ReasonTLSProfileInvalid).
//
// What the operator renders (and so the deployer): the APIServer's
// spec.tlsSecurityProfile (none or an unknown type: Intermediate; Custom
// without its settings: an error) only where spec.tlsAdherence says to
// honour it (StrictAllComponents or a value unknown to the release), else
// the Intermediate profile. spec.tlsAdherence exists only where the
// TLSAdherence feature gate is on (TechPreviewNoUpgrade and
// DevPreviewNoUpgrade on 4.22 and 5.0: vendor/github.com/openshift/api/
// features/features.go), so a Default cluster gets Intermediate's flags
// whatever its profile, as the operator gives its own controllers there.
// The openshift/api version go.mod pins predates the field, so the
// APIServer is read unstructured.

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	libgocrypto "github.com/openshift/library-go/pkg/crypto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// APIServerName is the one APIServer of an OpenShift cluster.
const APIServerName = "cluster"

// ReasonTLSProfileInvalid: the APIServer's TLS profile cannot be rendered
// for a release whose controllers take the TLS flags (a Custom profile
// without its settings, an unknown TLS version). The Deployment applied
// before is left running.
const ReasonTLSProfileInvalid = "TLSProfileInvalid"

// TLS adherence policies (spec.tlsAdherence of the APIServer, openshift/api
// after the version go.mod pins).
const (
	TLSAdherenceLegacy = "LegacyAdheringComponentsOnly"
	TLSAdherenceStrict = "StrictAllComponents"
)

// TLSProfile is the TLS part of the cluster's APIServer.
type TLSProfile struct {
	// Profile is spec.tlsSecurityProfile; nil when unset.
	Profile *configv1.TLSSecurityProfile
	// Adherence is spec.tlsAdherence; "" when unset or not served.
	Adherence string
	// invalid: the APIServer's spec.tlsSecurityProfile could not be
	// read.
	invalid error
}

// honoured is the profile the operator renders: the APIServer's where the
// adherence policy says to honour it (library-go's
// ShouldHonorClusterTLSProfile: unset and LegacyAdheringComponentsOnly do
// not, anything else does), else Intermediate (library-go's
// DefaultTLSProfileType).
func (p TLSProfile) honoured() (configv1.TLSProfileSpec, string, error) {
	if p.invalid != nil {
		return configv1.TLSProfileSpec{}, "", p.invalid
	}
	// the profile is resolved first, as the operator does, so a broken one
	// is refused whatever the adherence policy
	spec, name, err := profileSpec(p.Profile)
	if err != nil {
		return configv1.TLSProfileSpec{}, "", err
	}
	if p.Adherence == "" || p.Adherence == TLSAdherenceLegacy {
		return *configv1.TLSProfiles[configv1.TLSProfileIntermediateType], string(configv1.TLSProfileIntermediateType), nil
	}
	return spec, name, nil
}

// profileSpec is controller-runtime-common's GetTLSProfileSpec (as
// vendored on release-4.22): none, no type or an unknown type is
// Intermediate; Custom needs its settings.
func profileSpec(p *configv1.TLSSecurityProfile) (configv1.TLSProfileSpec, string, error) {
	intermediate := *configv1.TLSProfiles[configv1.TLSProfileIntermediateType]
	if p == nil || p.Type == "" {
		return intermediate, string(configv1.TLSProfileIntermediateType), nil
	}
	if p.Type != configv1.TLSProfileCustomType {
		if spec, ok := configv1.TLSProfiles[p.Type]; ok {
			return *spec, string(p.Type), nil
		}
		return intermediate, string(configv1.TLSProfileIntermediateType), nil
	}
	if p.Custom == nil {
		return configv1.TLSProfileSpec{}, "", fmt.Errorf("APIServer %s: tlsSecurityProfile type Custom without custom settings", APIServerName)
	}
	return p.Custom.TLSProfileSpec, string(configv1.TLSProfileCustomType), nil
}

// Args returns the TLS flags for the profile as the operator's getTLSArgs
// renders them: --tls-cipher-suites with the profile's ciphers that Go
// supports, by their IANA names (OpenSSL names converted), unless the
// minimum version is TLS 1.3 (whose suites Go does not let one choose) or
// none is left; then --tls-min-version.
func (p TLSProfile) Args() ([]string, error) {
	spec, _, err := p.honoured()
	if err != nil {
		return nil, err
	}
	minVersion, err := libgocrypto.TLSVersion(string(spec.MinTLSVersion))
	if err != nil {
		return nil, fmt.Errorf("APIServer %s: tlsSecurityProfile minTLSVersion %q: %w", APIServerName, spec.MinTLSVersion, err)
	}
	var args []string
	if minVersion != tls.VersionTLS13 {
		var codes []uint16
		for _, c := range spec.Ciphers {
			if code, ok := cipherCode(c); ok {
				codes = append(codes, code)
			}
		}
		if len(codes) > 0 {
			args = append(args, "--tls-cipher-suites="+strings.Join(libgocrypto.CipherSuitesToNamesOrDie(codes), ","))
		}
	}
	return append(args, "--tls-min-version="+string(spec.MinTLSVersion)), nil
}

// cipherCode is the Go code of a cipher named by its IANA or OpenSSL name;
// false for one Go does not support.
func cipherCode(name string) (uint16, bool) {
	if code, err := libgocrypto.CipherSuite(name); err == nil {
		return code, true
	}
	if iana := libgocrypto.OpenSSLToIANACipherSuites([]string{name}); len(iana) == 1 {
		if code, err := libgocrypto.CipherSuite(iana[0]); err == nil {
			return code, true
		}
	}
	return 0, false
}

// describe says which profile the flags come from, for the status.
func (p TLSProfile) describe() string {
	_, name, err := p.honoured()
	if err != nil {
		return "no TLS profile"
	}
	adherence := p.Adherence
	if adherence == "" {
		adherence = "unset"
	}
	return fmt.Sprintf("TLS profile %s (tlsAdherence %s)", name, adherence)
}

// apiServerObject is an empty APIServer to read unstructured.
func apiServerObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configv1.GroupVersion.WithKind("APIServer"))
	return u
}

// tlsProfileFrom reads the TLS part of an APIServer; a profile that
// cannot be read makes Args fail.
func tlsProfileFrom(u *unstructured.Unstructured) TLSProfile {
	var p TLSProfile
	p.Adherence, _, _ = unstructured.NestedString(u.Object, "spec", "tlsAdherence")
	raw, found, err := unstructured.NestedMap(u.Object, "spec", "tlsSecurityProfile")
	if err == nil && found {
		p.Profile = &configv1.TLSSecurityProfile{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, p.Profile)
	}
	if err != nil {
		p.invalid = fmt.Errorf("APIServer %s: spec.tlsSecurityProfile: %w", APIServerName, err)
	}
	return p
}

// clusterTLS returns the cluster's TLS profile: none (Intermediate) where
// the APIServer API is not served or the APIServer does not exist.
func (r *Reconciler) clusterTLS(ctx context.Context) (TLSProfile, error) {
	if !r.apiServerServed {
		return TLSProfile{}, nil
	}
	u := apiServerObject()
	err := r.egress.Get(ctx, types.NamespacedName{Name: APIServerName}, u)
	switch {
	case apierrors.IsNotFound(err):
		return TLSProfile{}, nil
	case err != nil:
		return TLSProfile{}, fmt.Errorf("reading APIServer %s: %w", APIServerName, err)
	}
	return tlsProfileFrom(u), nil
}
