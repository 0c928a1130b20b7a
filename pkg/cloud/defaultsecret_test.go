package cloud_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
)

// The manager's default credentials secret is read at every use, with the
// cloud's keys, and is what a spec without a secret gets; replacing it
// changes the credentials (and so the account) at the next read. A
// missing secret is retried, never a reason to use the environment.
func TestDefaultCredentialsSecret(t *testing.T) {
	ref := types.NamespacedName{Namespace: "openshift-machine-api", Name: "default-creds"}
	for _, tc := range []struct {
		cloud  cloud.Cloud
		before map[string]string
		after  map[string]string
	}{
		{cscloud.New(cscloud.Options{BaseURL: "http://127.0.0.1:1/", DefaultSecret: ref}),
			map[string]string{"token": "token-one"}, map[string]string{"token": "token-two"}},
		{exocloud.New(exocloud.Options{APIEndpoint: "http://127.0.0.1:1/v2", DefaultSecret: ref}),
			map[string]string{"api-key": "EXOone", "api-secret": "secret-one"}, map[string]string{"api-key": "EXOtwo", "api-secret": "secret-two"}},
	} {
		t.Run(tc.cloud.Name(), func(t *testing.T) {
			t.Setenv("CLOUDSCALE_API_TOKEN", "")
			t.Setenv("EXOSCALE_API_KEY", "")
			t.Setenv("EXOSCALE_API_SECRET", "")
			ctx := context.Background()
			c := fake.NewClientBuilder().Build()
			_, err := cloud.ReadCredentials(ctx, c, tc.cloud, "elsewhere", "", "tokenSecret")
			var cerr *cloud.CredentialsError
			if !errors.As(err, &cerr) || !cerr.Missing || cerr.Secret != ref.String() || !strings.Contains(err.Error(), "--default-credentials-secret") {
				t.Fatalf("without the secret: %v, want a missing-secret error naming %s and the flag", err, ref)
			}
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}, Data: bytes(tc.before)}
			if err := c.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			first, err := cloud.ReadCredentials(ctx, c, tc.cloud, "elsewhere", "", "tokenSecret")
			if err != nil || !maps.Equal(first.Values, tc.before) || first.Secret != ref.String() {
				t.Fatalf("credentials %+v (%v), want those of secret %s", first.Values, err, ref)
			}
			s.Data = bytes(tc.after)
			if err := c.Update(ctx, s); err != nil {
				t.Fatal(err)
			}
			second, err := cloud.ReadCredentials(ctx, c, tc.cloud, "elsewhere", "", "tokenSecret")
			if err != nil || !maps.Equal(second.Values, tc.after) || second.Fingerprint() == first.Fingerprint() {
				t.Fatalf("after the secret was replaced: %+v (%v), want the new credentials, another account", second.Values, err)
			}
		})
	}
}

// One default, used exactly as named: a default secret and default
// credentials from the environment or options together are refused at
// start.
func TestDefaultSecretAndEnvironmentRefused(t *testing.T) {
	ref := types.NamespacedName{Namespace: "ns", Name: "creds"}
	for name, c := range map[string]interface{ Check() error }{
		"cloudscale": cscloud.New(cscloud.Options{BaseURL: "http://127.0.0.1:1/", DefaultToken: "tok-1", DefaultSecret: ref}),
		"exoscale":   exocloud.New(exocloud.Options{APIEndpoint: "http://127.0.0.1:1/v2", DefaultAPIKey: "EXO1", DefaultAPISecret: "s1", DefaultSecret: ref}),
	} {
		err := c.Check()
		if err == nil || !strings.Contains(err.Error(), "give only one") || strings.Contains(err.Error(), "tok-1") || strings.Contains(err.Error(), "s1") {
			t.Errorf("%s: Check() = %v, want both defaults refused, no value quoted", name, err)
		}
	}
}

func bytes(m map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}
