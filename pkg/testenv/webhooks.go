package testenv

import (
	"context"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Webhooks are admission webhook configurations for Start to install, served
// by the test itself: envtest makes a CA and a serving certificate for
// 127.0.0.1, and points each webhook that names a service path at
// https://127.0.0.1:<free port><path> with that CA. After Start, Port and
// CertDir say where the test's webhook server must listen.
type Webhooks struct {
	Mutating   []*admissionv1.MutatingWebhookConfiguration
	Validating []*admissionv1.ValidatingWebhookConfiguration

	env *envtest.Environment
}

// WithWebhooks installs the webhook configurations of w.
func WithWebhooks(w *Webhooks) Option {
	return func(env *envtest.Environment) {
		w.env = env
		env.WebhookInstallOptions.MutatingWebhooks = append(env.WebhookInstallOptions.MutatingWebhooks, w.Mutating...)
		env.WebhookInstallOptions.ValidatingWebhooks = append(env.WebhookInstallOptions.ValidatingWebhooks, w.Validating...)
	}
}

// Host is the address the API server calls the webhooks on (set by Start).
func (w *Webhooks) Host() string { return w.opts().LocalServingHost }

// Port is the port the API server calls the webhooks on (set by Start).
func (w *Webhooks) Port() int { return w.opts().LocalServingPort }

// CertDir holds the serving certificate, tls.crt and tls.key (set by Start).
func (w *Webhooks) CertDir() string { return w.opts().LocalServingCertDir }

func (w *Webhooks) opts() *envtest.WebhookInstallOptions {
	if w.env == nil {
		return &envtest.WebhookInstallOptions{}
	}
	return &w.env.WebhookInstallOptions
}

// Serve runs the provider's webhooks for c and the cluster clusterID
// (webhooks.Serve, as the webhook Deployment does) on the port and
// certificate the API server was given, until the test ends; a failure to
// serve fails the test.
func (w *Webhooks) Serve(t testing.TB, c cloud.Cloud, clusterID string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- webhooks.Serve(ctx, webhooks.ServeOptions{
			Cloud: c, ClusterID: clusterID, Port: w.Port(), CertDir: w.CertDir(),
			HealthProbeBindAddress: "0", MetricsBindAddress: "0",
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("webhooks.Serve: %v", err)
		}
	})
}
