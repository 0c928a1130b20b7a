package cloud

import (
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// countingCloud is a Cloud that makes empty clients and counts them.
type countingCloud struct{ made int }

func (c *countingCloud) Name() string     { return "test" }
func (c *countingCloud) SpecKind() string { return "TestSpec" }
func (c *countingCloud) ParseSpec(machinev1.ProviderSpec, *field.Path) (Spec, field.ErrorList) {
	return nil, nil
}
func (c *countingCloud) CredentialsSecretOf(machinev1.ProviderSpec) (string, bool) { return "", true }
func (c *countingCloud) CredentialKeys() []string                                  { return []string{"token"} }
func (c *countingCloud) DefaultCredentials() *Credentials                          { return nil }
func (c *countingCloud) DefaultCredentialsSecret() types.NamespacedName {
	return types.NamespacedName{}
}
func (c *countingCloud) DefaultRateLimit() RateLimit { return RateLimit{QPS: 1, Burst: 1} }
func (c *countingCloud) CallTimeout() time.Duration  { return time.Second }
func (c *countingCloud) NewClient(Credentials, *Gate) (Client, error) {
	c.made++
	return &listClient{}, nil
}

func creds(token string) Credentials { return Credentials{Values: map[string]string{"token": token}} }

func TestAccountsShareAndRelease(t *testing.T) {
	c := &countingCloud{}
	a := NewAccounts(c, AccountOptions{})
	x1, _ := a.Get("machine/1", creds("x"))
	x2, _ := a.Get("machine/2", creds("x"))
	y, _ := a.Get("machine/3", creds("y"))
	if x1 != x2 || x1 == y || c.made != 2 {
		t.Fatalf("two owners of one token must share an account, two tokens must not (clients made: %d)", c.made)
	}
	if x1.View("c1") != x2.View("c1") || x1.View("c1") == x1.View("c2") {
		t.Error("views must be per account and cluster")
	}
	// Owner 2 moves to token y: x keeps owner 1.
	if moved, _ := a.Get("machine/2", creds("y")); moved != y {
		t.Fatal("the moved owner did not get y's account")
	}
	a.Release("machine/1")
	if a.Len() != 1 {
		t.Fatalf("%d accounts after x lost its owners, want 1", a.Len())
	}
	a.Release("machine/2")
	a.Release("machine/3")
	a.Release("machine/3")
	if a.Len() != 0 {
		t.Fatalf("%d accounts after every owner went, want 0", a.Len())
	}
	// A new owner gets a new client.
	if _, err := a.Get("machine/4", creds("x")); err != nil || c.made != 3 {
		t.Errorf("clients made %d, want 3", c.made)
	}
}

func TestFingerprintHidesTheCredentials(t *testing.T) {
	f := creds("secret-token-123").Fingerprint()
	if len(f) != 16 || f == creds("secret-token-124").Fingerprint() || f != creds("secret-token-123").Fingerprint() {
		t.Errorf("fingerprint %q must be stable, short and distinct", f)
	}
}

func TestCheckCredentialValue(t *testing.T) {
	for v, bad := range map[string]bool{
		"": true, "   ": true, "tok\n": true, "to k": true, "tok\t": true, "tok\x00x": true, "\ntok": true,
		"EXOabc123": false, "a-b_c.d/e+f=": false,
	} {
		if got := CheckCredentialValue(v) != ""; got != bad {
			t.Errorf("CheckCredentialValue(%q) refused = %v, want %v", v, got, bad)
		}
	}
}
