package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	"github.com/appuio/machine-api-provider/pkg/clusterid"
)

// ServeOptions configure Serve.
type ServeOptions struct {
	// Cloud whose provider specs the webhooks default and validate. Its
	// credentials are never used: the webhooks make no cloud API call.
	Cloud cloud.Cloud
	// Port to serve the webhooks on (HTTPS).
	Port int
	// CertDir holds the serving certificate and key, tls.crt and tls.key.
	// They are reloaded when they change.
	CertDir string
	// HealthProbeBindAddress serves /healthz and /readyz (ready once the
	// webhook server listens); "0" turns them off.
	HealthProbeBindAddress string
	// MetricsBindAddress serves /metrics (controller-runtime's webhook
	// metrics: requests, latency, in flight); "0" turns it off.
	MetricsBindAddress string
	// ClusterID is the cluster's identity (identity.go), which the
	// validating webhooks hold the cluster label to. Empty, it is read from
	// the Infrastructure named cluster with Config.
	ClusterID string
	// LegacyClusterIDs are the legacy IDs the cluster owns besides
	// ClusterID (pkg/clusterid), with ClusterID only; without ClusterID
	// they are read from the Infrastructure's annotation.
	LegacyClusterIDs []string
	// Config reaches the API server, to read the Infrastructure when
	// ClusterID is empty: the in-cluster config, with the pod's service
	// account.
	Config *rest.Config
	// InfrastructurePoll is how often the Infrastructure is read again
	// until it names the identity. Default 5 seconds.
	InfrastructurePoll time.Duration
	Log                logr.Logger
}

// NewServer is the webhook server with the provider's TLS settings, the four
// webhooks registered, validating for the cluster whose identity is id.
func NewServer(c cloud.Cloud, port int, certDir string, id *Identity) webhook.Server {
	srv := webhook.NewServer(webhook.Options{
		Port:    port,
		CertDir: certDir,
		// HTTP/1.1 only: HTTP/2 stream resets (CVE-2023-44487) are not
		// worth the exposure for a few requests a minute.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	})
	Register(srv, c, id)
	return srv
}

// Serve runs the webhooks until ctx ends. It needs no cloud credentials:
// the webhooks look at the object in the admission request, and at the
// cluster's identity, which it reads once from the Infrastructure unless
// ClusterID gives it (identity.go): the pods that serve them may get that
// one object, nothing else. They run in a Deployment of their own that
// every way of installing declares (config/webhook, the OLM bundle), never
// in the Deployment the deployer applies at runtime (docs/design.md says
// why).
func Serve(ctx context.Context, o ServeOptions) error {
	if o.Cloud == nil {
		return errors.New("webhooks: no cloud")
	}
	id := &Identity{}
	var read func(context.Context) error
	switch {
	case o.ClusterID != "":
		legacy, err := clusterid.ParseLegacy(strings.Join(o.LegacyClusterIDs, ","), o.ClusterID)
		if err != nil {
			return fmt.Errorf("webhooks: --legacy-cluster-ids: %w", err)
		}
		id.SetIDs(clusterid.IDs{Own: o.ClusterID, Legacy: legacy})
	case o.Config == nil:
		return errors.New("webhooks: no cluster ID, and no API server to read the Infrastructure's infrastructureName from")
	default:
		var err error
		if read, err = infrastructureReader(o.Config, id, o.Log); err != nil {
			return fmt.Errorf("webhooks: the cluster's identity cannot be read: %w", err)
		}
	}
	if o.InfrastructurePoll <= 0 {
		o.InfrastructurePoll = 5 * time.Second
	}
	srv := NewServer(o.Cloud, o.Port, o.CertDir, id)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if read != nil {
		go readInfrastructure(ctx, read, id, o.InfrastructurePoll, o.Log)
	}

	errs := make(chan error, 3)
	running := 0
	serve := func(name, addr string, h http.Handler) error {
		if addr == "" || addr == "0" {
			return nil
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		running++
		go func() {
			<-ctx.Done()
			shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
			defer done()
			_ = hs.Shutdown(shutdown)
		}()
		go func() {
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			errs <- nil
		}()
		o.Log.Info("serving", "what", name, "address", l.Addr().String())
		return nil
	}

	started := srv.StartedChecker()
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := started(r); err != nil {
			http.Error(w, "webhook server: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if _, known := id.Get(); !known {
			http.Error(w, "the cluster's identity (the Infrastructure's infrastructureName) is not known yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if err := serve("health probes", o.HealthProbeBindAddress, probes); err != nil {
		return err
	}
	if err := serve("metrics", o.MetricsBindAddress, promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})); err != nil {
		return err
	}
	running++
	go func() { errs <- srv.Start(ctx) }()
	o.Log.Info("serving the admission webhooks", "cloud", o.Cloud.Name(), "port", o.Port, "certDir", o.CertDir)

	// The first to end ends the others: a webhook server without its
	// probes would be taken for ready, or never be.
	var first error
	for range running {
		err := <-errs
		if first == nil && err != nil {
			first = err
		}
		cancel()
	}
	return first
}
