package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/appuio/machine-api-provider/pkg/actuator"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
)

// TestEveryCloudCallHonoursTheTimeout: the cloud the manager and adopt
// build (newCloud, from --cloud-api-timeout) gives up on a call that does
// not answer after the timeout, on both clouds; and the manager refuses a
// create grace that is not longer than the timeout the cloud's calls
// actually use, whoever built the cloud.
func TestEveryCloudCallHonoursTheTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (cloudEndpoints, *harness.Harness, cloud.Credentials)
		list  string
	}{
		{"cloudscale", func(t *testing.T) (cloudEndpoints, *harness.Harness, cloud.Credentials) {
			e, err := emucs.New(emucs.Config{})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(e)
			t.Cleanup(srv.Close)
			return cloudEndpoints{cloudscale: srv.URL + "/"}, e.Harness(), cloud.Credentials{Values: map[string]string{"token": "any"}, Source: "test"}
		}, "GET /v1/servers"},
		{"exoscale", func(t *testing.T) (cloudEndpoints, *harness.Harness, cloud.Credentials) {
			e, err := emuexo.New(emuexo.Config{})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(e)
			t.Cleanup(srv.Close)
			return cloudEndpoints{exoscale: srv.URL + "/v2"}, e.Harness(), cloud.Credentials{
				Values: map[string]string{"api-key": emuexo.DefaultAPIKey, "api-secret": emuexo.DefaultAPISecret}, Source: "test"}
		}, "GET /v2/instance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, h, creds := tc.start(t)
			c, err := newCloud(tc.name, ep, timeout, types.NamespacedName{})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.CallTimeout(); got != timeout {
				t.Errorf("the cloud's calls time out after %s, want --cloud-api-timeout's %s", got, timeout)
			}
			// The list does not answer for a minute.
			if err := h.AddRule(harness.Rule{Route: tc.list, Latency: harness.Duration(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			cl, err := c.NewClient(creds, cloud.NewGate(tc.name, cloud.RateLimit{}))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = cl.ListServers(context.Background(), cloud.Selector{ClusterID: "c1"})
			// Each try gives up after the timeout (a read is tried three
			// times): well below the minute, however loaded the host.
			if took := time.Since(start); err == nil || took > 30*time.Second {
				t.Fatalf("a list that does not answer: %v after %s, want a timeout after about %d × %s", err, took, cloud.ReadAttempts, timeout)
			}

			// The manager measures the grace against the cloud's timeout.
			slow, err := newCloud(tc.name, ep, 3*time.Minute, types.NamespacedName{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{Cloud: slow, ClusterID: "timeout-test-x7k2p", Actuator: actuator.Options{CreateGrace: 2 * time.Minute}})
			if err == nil || !strings.Contains(err.Error(), "create grace") || !strings.Contains(err.Error(), "3m0s") {
				t.Errorf("a create grace of 2m with calls that time out after 3m: %v, want a refusal naming both", err)
			}
		})
	}
}
