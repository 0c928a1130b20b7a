package deployer

// The provider's way out to the cloud's API on OpenShift: the cluster-wide
// proxy and the cluster's trusted CA bundle, handed to the
// machine-controller as the machine-api-operator hands them to its own.
//
// The proxy is proxies.config.openshift.io/cluster. Its status, not its
// spec, holds what is in effect: the network operator copies httpProxy and
// httpsProxy there once it has validated them and completes noProxy with
// the cluster's own networks and names (service and pod networks, api-int,
// .svc, .cluster.local), so the provider's calls to the API server never go
// through the proxy. The values become HTTP_PROXY, HTTPS_PROXY and NO_PROXY
// of the machine-controller, upper case only, as the machine-api-operator
// and OLM set them (Go's net/http reads the upper-case names first); an
// empty value sets no variable. Only the machine-controller gets them: it is
// the one container that calls out of the cluster (the cloud's API); the
// operator's controllers and the kube-rbac-proxy sidecars talk to the API
// server alone. The values never go into a log, event or status: a proxy
// URL may carry credentials.
//
// The trusted CA bundle comes the usual OpenShift way: the deployer applies
// the ConfigMap machine-api-provider-trusted-ca labelled
// config.openshift.io/inject-trusted-cabundle=true, and the network
// operator writes the merged bundle into it under ca-bundle.crt (the
// system's public roots and the Proxy's spec.trustedCA, e.g. a
// TLS-intercepting proxy's CA). The deployer applies labels only, server-side
// with its own field manager; the data belongs to the injector, which
// updates it as its own manager, so the two never contend for a field. The
// machine-controller mounts the bundle where Go finds it next to the
// image's own roots (see machineContainer). Go reads its roots once per
// process, so a changed bundle needs new pods: its digest goes on the pod
// template (TrustedCAHashAnnotation), and a change rolls the Deployment.
//
// A cluster without the Proxy API (a plain Kubernetes, config/default) has
// no proxy; whether the API is served is looked up once, when the deployer
// starts. The CA ConfigMap is applied there too: nothing injects into it,
// but a bundle put into it by hand is mounted and rolled like an injected
// one.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The trusted CA bundle and the cluster-wide proxy.
const (
	// TrustedCAConfigMap is the ConfigMap the deployer applies for the
	// network operator to inject the cluster's trusted CA bundle into. Its
	// own, not the operator's mao-trusted-ca: that one comes and goes with
	// the operator's manifests.
	TrustedCAConfigMap = "machine-api-provider-trusted-ca"
	// TrustedCAKey is the key the injector writes the bundle under.
	TrustedCAKey = "ca-bundle.crt"
	// InjectTrustedCABundleLabel asks the network operator to inject.
	InjectTrustedCABundleLabel = "config.openshift.io/inject-trusted-cabundle"
	// TrustedCAHashAnnotation on the pod template is the SHA-256 of the
	// bundle the pods read; absent while there is none.
	TrustedCAHashAnnotation = "machine.appuio.io/trusted-ca-hash"
	// ClusterProxyName is the one Proxy OpenShift reads.
	ClusterProxyName = "cluster"
)

// Proxy is the cluster-wide proxy as the provider gets it.
type Proxy struct {
	HTTPProxy  string
	HTTPSProxy string
	NoProxy    string
}

// proxyFromStatus returns what is in effect of p: its status.
func proxyFromStatus(p *configv1.Proxy) Proxy {
	return Proxy{HTTPProxy: p.Status.HTTPProxy, HTTPSProxy: p.Status.HTTPSProxy, NoProxy: p.Status.NoProxy}
}

// env returns the proxy's environment variables, leaving out the empty
// ones and those that override names: a variable given explicitly
// (--provider-env) wins over the cluster's.
func (p Proxy) env(override []corev1.EnvVar) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, v := range []corev1.EnvVar{
		{Name: "HTTP_PROXY", Value: p.HTTPProxy},
		{Name: "HTTPS_PROXY", Value: p.HTTPSProxy},
		{Name: "NO_PROXY", Value: p.NoProxy},
	} {
		if v.Value == "" || slices.ContainsFunc(override, func(o corev1.EnvVar) bool { return o.Name == v.Name }) {
			continue
		}
		env = append(env, v)
	}
	return env
}

// describe says which variables are set, never their values (a proxy URL
// may carry a password).
func (p Proxy) describe() string {
	var names []string
	for _, v := range p.env(nil) {
		names = append(names, v.Name)
	}
	if len(names) == 0 {
		return "no cluster-wide proxy"
	}
	return "cluster-wide proxy (" + strings.Join(names, ", ") + ")"
}

// HashTrustedCA is the digest of a trust bundle put on the pod template;
// "" for no bundle.
func HashTrustedCA(bundle string) string {
	if bundle == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(bundle))
	return hex.EncodeToString(sum[:])
}

func describeTrustedCA(hash string) string {
	if hash == "" {
		return "no trusted CA bundle in " + TrustedCAConfigMap
	}
	return "trusted CA bundle sha256:" + hash[:12]
}

// egressCache holds just what the deployer reads for the proxy and the
// trust bundle: the ConfigMap TrustedCAConfigMap of the namespace and,
// where served, the Proxy named cluster. A cache of its own, because the
// manager's holds a single ConfigMap by name (a field selector cannot
// name two), and because RBAC grants the Proxy by name, which a list or
// watch passes only with that name as its field selector.
type egressCache struct{ cache.Cache }

// GetCache makes the manager start the cache with its own, before the
// controllers and leader election.
func (c egressCache) GetCache() cache.Cache { return c.Cache }

// configServed reports whether the API server serves the
// config.openshift.io kind (OpenShift does, a plain Kubernetes does not).
func configServed(mgr ctrl.Manager, kind string) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: configv1.GroupName, Kind: kind}, configv1.GroupVersion.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up the config.openshift.io %s API: %w", kind, err)
	}
	return true, nil
}

// newEgressCache builds the egressCache for namespace ns, with the Proxy
// when withProxy, the ClusterVersion when withVersion, the Infrastructure
// when withInfra and the APIServer (unstructured, tlsprofile.go) when
// withAPIServer (all cluster-wide and granted by name, so cached here for
// the same reason), and adds it to mgr.
func newEgressCache(mgr ctrl.Manager, ns string, withProxy, withVersion, withInfra, withAPIServer bool) (cache.Cache, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := configv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", TrustedCAConfigMap)},
	}
	if withProxy {
		byObject[&configv1.Proxy{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", ClusterProxyName)}
	}
	if withVersion {
		byObject[&configv1.ClusterVersion{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", ClusterVersionName)}
	}
	if withInfra {
		byObject[&configv1.Infrastructure{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", InfrastructureName)}
	}
	if withAPIServer {
		byObject[apiServerObject()] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", APIServerName)}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            scheme,
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		ByObject:          byObject,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(egressCache{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// trustedCA applies the trusted CA ConfigMap unless it is there with its
// labels, and returns the digest of the bundle in it ("" for none).
func (r *Reconciler) trustedCA(ctx context.Context) (string, error) {
	ns := r.opts.Namespace
	cm := &corev1.ConfigMap{}
	err := r.egress.Get(ctx, types.NamespacedName{Namespace: ns, Name: TrustedCAConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", ns, TrustedCAConfigMap, err)
	case cm.Labels[InjectTrustedCABundleLabel] == "true" && cm.Labels[ManagedByLabel] == ManagedByValue:
		return HashTrustedCA(cm.Data[TrustedCAKey]), nil
	}
	// Labels only: the data is the injector's.
	ac := corev1ac.ConfigMap(TrustedCAConfigMap, ns).WithLabels(map[string]string{
		InjectTrustedCABundleLabel: "true",
		ManagedByLabel:             ManagedByValue,
	})
	if err := r.client.Apply(ctx, ac, client.FieldOwner(ManagedByValue), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("applying ConfigMap %s/%s: %w", ns, TrustedCAConfigMap, err)
	}
	// Whatever someone put in before (a bundle by hand) counts at once;
	// the injector's bundle comes with the next event.
	return HashTrustedCA(cm.Data[TrustedCAKey]), nil
}

// clusterProxy returns the cluster-wide proxy: none where the Proxy API is
// not served or the Proxy does not exist.
func (r *Reconciler) clusterProxy(ctx context.Context) (Proxy, error) {
	if !r.proxyServed {
		return Proxy{}, nil
	}
	p := &configv1.Proxy{}
	err := r.egress.Get(ctx, types.NamespacedName{Name: ClusterProxyName}, p)
	switch {
	case apierrors.IsNotFound(err):
		return Proxy{}, nil
	case err != nil:
		return Proxy{}, fmt.Errorf("reading Proxy %s: %w", ClusterProxyName, err)
	}
	return proxyFromStatus(p), nil
}
