package deployer

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	cliflag "k8s.io/component-base/cli/flag"
)

// intermediateArgs are the flags of OpenShift's Intermediate profile as
// the operator renders them on release-4.22 (pkg/operator/sync.go
// getTLSArgs): its TLS 1.3 and ECDHE suites by IANA name, in the profile's
// order, then the minimum version.
var intermediateArgs = []string{
	"--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256," +
		"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256," +
		"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384," +
		"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"--tls-min-version=VersionTLS12",
}

func TestTLSArgs(t *testing.T) {
	profile := func(typ configv1.TLSProfileType) *configv1.TLSSecurityProfile {
		return &configv1.TLSSecurityProfile{Type: typ}
	}
	custom := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
		TLSProfileSpec: configv1.TLSProfileSpec{
			// OpenSSL and IANA names, and one Go does not support
			Ciphers:       []string{"ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "DHE-RSA-AES256-GCM-SHA384"},
			MinTLSVersion: configv1.VersionTLS12,
		},
	}}
	for _, tc := range []struct {
		name    string
		p       TLSProfile
		want    []string
		wantErr string
	}{
		{name: "no APIServer", want: intermediateArgs},
		{name: "Modern, adherence unset (a Default cluster): Intermediate", p: TLSProfile{Profile: profile(configv1.TLSProfileModernType)}, want: intermediateArgs},
		{name: "Modern, legacy adherence: Intermediate", p: TLSProfile{Profile: profile(configv1.TLSProfileModernType), Adherence: TLSAdherenceLegacy}, want: intermediateArgs},
		{name: "Modern, strict: TLS 1.3 without suites", p: TLSProfile{Profile: profile(configv1.TLSProfileModernType), Adherence: TLSAdherenceStrict},
			want: []string{"--tls-min-version=VersionTLS13"}},
		{name: "Modern, an adherence unknown to the release counts as strict", p: TLSProfile{Profile: profile(configv1.TLSProfileModernType), Adherence: "SomethingNewer"},
			want: []string{"--tls-min-version=VersionTLS13"}},
		{name: "custom, strict: OpenSSL names to IANA, unsupported dropped", p: TLSProfile{Profile: custom, Adherence: TLSAdherenceStrict},
			want: []string{"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "--tls-min-version=VersionTLS12"}},
		{name: "unknown type: Intermediate", p: TLSProfile{Profile: profile("Future"), Adherence: TLSAdherenceStrict}, want: intermediateArgs},
		{name: "Custom without settings, strict", p: TLSProfile{Profile: profile(configv1.TLSProfileCustomType), Adherence: TLSAdherenceStrict},
			wantErr: "Custom without custom settings"},
		{name: "Custom without settings is refused under legacy adherence too, as by the operator",
			p: TLSProfile{Profile: profile(configv1.TLSProfileCustomType)}, wantErr: "Custom without custom settings"},
		{name: "an unknown TLS version", p: TLSProfile{Adherence: TLSAdherenceStrict, Profile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType,
			Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: "VersionTLS14"}}}}, wantErr: "VersionTLS14"},
	} {
		got, err := tc.p.Args()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, %v; want an error saying %q", tc.name, got, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !slices.Equal(got, tc.want):
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	// Old: TLS 1.0 and every suite Go has of the profile's
	got, err := TLSProfile{Profile: profile(configv1.TLSProfileOldType), Adherence: TLSAdherenceStrict}.Args()
	if err != nil || len(got) != 2 || got[1] != "--tls-min-version=VersionTLS10" || !strings.Contains(got[0], "TLS_RSA_WITH_AES_128_CBC_SHA") {
		t.Errorf("Old: %q, %v", got, err)
	}
}

// The profile is read from the APIServer as served: spec.tlsAdherence
// (newer than the openshift/api go.mod pins) and spec.tlsSecurityProfile;
// one that cannot be read fails the rendering, not the read.
func TestTLSProfileFrom(t *testing.T) {
	u := apiServerObject()
	u.SetName(APIServerName)
	_ = unstructured.SetNestedField(u.Object, TLSAdherenceStrict, "spec", "tlsAdherence")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"type": "Modern", "modern": map[string]any{}}, "spec", "tlsSecurityProfile")
	p := tlsProfileFrom(u)
	if p.Adherence != TLSAdherenceStrict || p.Profile == nil || p.Profile.Type != configv1.TLSProfileModernType {
		t.Errorf("read %+v", p)
	}
	if args, err := p.Args(); err != nil || !slices.Equal(args, []string{"--tls-min-version=VersionTLS13"}) {
		t.Errorf("args %q, %v", args, err)
	}
	if got := p.describe(); got != "TLS profile Modern (tlsAdherence StrictAllComponents)" {
		t.Errorf("describe: %q", got)
	}
	_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "tlsSecurityProfile", "type")
	if _, err := tlsProfileFrom(u).Args(); err == nil {
		t.Error("a profile of the wrong shape rendered")
	}
}

// Every argument the Deployment passes a machine-api-operator binary or a
// kube-rbac-proxy sidecar names a flag that release's binary defines, as
// the table records the flag sets (read from each release branch's
// cmd/*/main.go and pkg/operator/sync.go), for every TLS profile the
// deployer can render; the TLS flags' values are ones the binaries accept
// (k8s.io/component-base's TLS names, which cmd/machineset/main.go and
// kube-rbac-proxy parse with). A flag a release lacks stops its binary at
// start, so it can never be rendered.
func TestRenderedFlagsAreDefined(t *testing.T) {
	profiles := []TLSProfile{
		{},
		{Profile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, Adherence: TLSAdherenceStrict},
		{Profile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType}, Adherence: TLSAdherenceStrict},
	}
	suites := cliflag.TLSCipherPossibleValues()
	versions := cliflag.TLSPossibleVersions()
	checked := map[string]bool{}
	for _, r := range Releases {
		for _, p := range profiles {
			tls, err := p.Args()
			if err != nil {
				t.Fatal(err)
			}
			s := testSpec()
			s.Release, s.TLSArgs = r, tls
			d := Deployment(s)
			for _, c := range d.Spec.Template.Spec.Containers {
				flags, ok := r.Flags.Of(c.Name)
				if !ok {
					continue // the provider's own manager
				}
				checked[r.String()] = true
				for _, a := range c.Args {
					name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if !slices.Contains(flags, name) {
						t.Errorf("%s: %s gets %s, a flag its binary does not define (%v)", r, c.Name, a, flags)
					}
					switch name {
					case "tls-cipher-suites":
						for _, suite := range strings.Split(value, ",") {
							if !slices.Contains(suites, suite) {
								t.Errorf("%s: %s: cipher suite %s is none the binary takes", r, c.Name, suite)
							}
						}
					case "tls-min-version":
						if !slices.Contains(versions, value) {
							t.Errorf("%s: %s: TLS version %s is none the binary takes", r, c.Name, value)
						}
					}
				}
			}
			// 4.22 and later: the TLS flags reach the machineset-controller
			// and every sidecar; before, the machineset-controller gets
			// none and the sidecars the fixed list
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name != MachineSetContainer && !strings.HasPrefix(c.Name, ProxyContainerPrefix) {
					continue
				}
				for _, a := range tls {
					if has := slices.Contains(c.Args, a); has != r.TLSFlags {
						t.Errorf("%s: %s has %s: %t", r, c.Name, a, has)
					}
				}
			}
		}
	}
	for _, want := range []string{"4.22", "4.23", "5.0"} {
		if !checked[want] {
			t.Errorf("%s: not rendered", want)
		}
	}
}
