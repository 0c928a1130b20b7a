package testenv

import (
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
