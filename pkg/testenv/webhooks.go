package testenv

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

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
// certificate the API server was given, until the test ends or stop is
// called (as the Deployment scaled to 0); a failure to serve fails the test.
func (w *Webhooks) Serve(t testing.TB, c cloud.Cloud, clusterID string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- webhooks.Serve(ctx, webhooks.ServeOptions{
			Cloud: c, ClusterID: clusterID, Port: w.Port(), CertDir: w.CertDir(),
			HealthProbeBindAddress: "0", MetricsBindAddress: "0",
		})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("webhooks.Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// DocWebhooks are the webhook configurations of the YAML blocks of a
// Markdown file (docs/webhook.md: the ones a cluster gets), to install
// with WithWebhooks.
func DocWebhooks(t testing.TB, file string) *Webhooks {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	w := &Webhooks{}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		for _, doc := range strings.Split(block[1], "\n---\n") {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v in\n%s", file, err, doc)
			}
			switch tm.Kind {
			case "MutatingWebhookConfiguration":
				m := &admissionv1.MutatingWebhookConfiguration{}
				if err := yaml.UnmarshalStrict([]byte(doc), m); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				w.Mutating = append(w.Mutating, m)
			case "ValidatingWebhookConfiguration":
				v := &admissionv1.ValidatingWebhookConfiguration{}
				if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				w.Validating = append(w.Validating, v)
			}
		}
	}
	return w
}
