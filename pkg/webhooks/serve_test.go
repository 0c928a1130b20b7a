package webhooks_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/pkg/webhooks"
)

// TestServe runs the webhook server as the webhook subcommand does, without
// a Kubernetes client: /healthz answers, /readyz once the webhook server
// listens, the webhooks answer over TLS with the certificate of the cert
// dir, /metrics has the webhook requests, and ending the context ends all
// of it without an error. Without a certificate it does not start.
func TestServe(t *testing.T) {
	certDir := t.TempDir()
	writeCert(t, certDir)
	port, health, metrics := freePort(t), freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- webhooks.Serve(ctx, webhooks.ServeOptions{
			Cloud: cscloud.New(cscloud.Options{}), ClusterID: "c1-x7k2p", Port: port, CertDir: certDir,
			HealthProbeBindAddress: fmt.Sprintf("127.0.0.1:%d", health),
			MetricsBindAddress:     fmt.Sprintf("127.0.0.1:%d", metrics),
			Log:                    logr.Discard(),
		})
	}()

	get := func(url string) (int, string, error) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %v", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/healthz", health)); code != http.StatusOK {
		t.Errorf("/healthz: %d %v", code, err)
	}

	// An admission review of a Machine without a spec: allowed, over TLS.
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(certDir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"machine.openshift.io","version":"v1beta1","kind":"Machine"},
		"resource":{"group":"machine.openshift.io","version":"v1beta1","resource":"machines"},"operation":"CREATE","object":{"apiVersion":"machine.openshift.io/v1beta1","kind":"Machine","metadata":{"name":"m"}}}}`
	resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, webhooks.ValidateMachinePath), "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"uid":"1"`) || !strings.Contains(string(body), `"allowed":true`) {
		t.Errorf("the validating webhook: %s %s", resp.Status, body)
	}
	if _, body, err := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)); err != nil || !strings.Contains(body, "controller_runtime_webhook_requests_total") {
		t.Errorf("/metrics lacks the webhook requests (%v)", err)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}

	// No certificate: it does not start.
	err = webhooks.Serve(context.Background(), webhooks.ServeOptions{
		Cloud: cscloud.New(cscloud.Options{}), ClusterID: "c1-x7k2p", Port: freePort(t), CertDir: t.TempDir(),
		HealthProbeBindAddress: "0", MetricsBindAddress: "0", Log: logr.Discard(),
	})
	if err == nil {
		t.Error("Serve started without a certificate")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeCert writes a self-signed certificate for localhost and 127.0.0.1
// into dir as tls.crt and tls.key.
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Without --cluster-id the webhook server reads the cluster's identity from
// the Infrastructure named cluster: until that names an infrastructureName
// it is not ready (the API server then calls no pod of it) and would refuse
// every Machine and MachineSet it validates; once it does, it is ready and
// holds the cluster label to it.
func TestServeWaitsForTheClusterIdentity(t *testing.T) {
	cfg, _ := testenv.Start(t, testenv.WithCRDs(testenv.InfrastructureCRD(t)))
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	writeCert(t, certDir)
	health := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- webhooks.Serve(ctx, webhooks.ServeOptions{
			Cloud: cscloud.New(cscloud.Options{}), Config: cfg, InfrastructurePoll: 100 * time.Millisecond,
			Port: freePort(t), CertDir: certDir, HealthProbeBindAddress: fmt.Sprintf("127.0.0.1:%d", health), MetricsBindAddress: "0", Log: logr.Discard(),
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	readyz := func() (int, string) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// Listening, but without an identity: not ready, and it stays so
	// across several reads of the Infrastructure.
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := readyz()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "identity") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %s, want 503 for the identity", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if code, body := readyz(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without an Infrastructure: %d %s", code, body)
	}
	createInfrastructure(t, c, "c1-x7k2p")
	deadline = time.Now().Add(time.Minute)
	for {
		code, body := readyz()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the Infrastructure names the identity: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
