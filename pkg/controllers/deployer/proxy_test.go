package deployer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func envOf(c corev1.Container) map[string][]string {
	m := map[string][]string{}
	for _, e := range c.Env {
		m[e.Name] = append(m[e.Name], e.Value)
	}
	return m
}

var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

// TestDeploymentProxy: the cluster-wide proxy goes to the machine-controller
// alone, empty values set nothing, and an explicit --provider-env wins.
func TestDeploymentProxy(t *testing.T) {
	s := testSpec()
	s.Proxy = Proxy{HTTPProxy: "http://proxy.example:3128", HTTPSProxy: "http://proxy.example:3129", NoProxy: ".cluster.local,.svc,10.0.0.0/16"}
	for _, c := range Deployment(s).Spec.Template.Spec.Containers {
		env := envOf(c)
		if c.Name != MachineContainer {
			for _, v := range proxyVars {
				if _, ok := env[v]; ok {
					t.Errorf("%s has %s: only the machine-controller calls out of the cluster", c.Name, v)
				}
			}
			continue
		}
		for name, want := range map[string]string{"HTTP_PROXY": s.Proxy.HTTPProxy, "HTTPS_PROXY": s.Proxy.HTTPSProxy, "NO_PROXY": s.Proxy.NoProxy} {
			if got := env[name]; len(got) != 1 || got[0] != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
	}

	s.Proxy = Proxy{HTTPSProxy: "http://proxy.example:3129"}
	env := envOf(findContainer(t, Deployment(s).Spec.Template.Spec.Containers, MachineContainer))
	if _, ok := env["HTTP_PROXY"]; ok {
		t.Errorf("HTTP_PROXY set from an empty httpProxy")
	}
	if _, ok := env["NO_PROXY"]; ok {
		t.Errorf("NO_PROXY set from an empty noProxy")
	}

	s.ProviderEnv = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://mine:8080"}}
	env = envOf(findContainer(t, Deployment(s).Spec.Template.Spec.Containers, MachineContainer))
	if got := env["HTTPS_PROXY"]; len(got) != 1 || got[0] != "http://mine:8080" {
		t.Errorf("HTTPS_PROXY = %q, want only the explicit http://mine:8080", got)
	}

	env = envOf(findContainer(t, Deployment(testSpec()).Spec.Template.Spec.Containers, MachineContainer))
	for _, v := range proxyVars {
		if _, ok := env[v]; ok {
			t.Errorf("no proxy, yet %s is set", v)
		}
	}
}

// TestDeploymentTrustedCA: the bundle's digest is on the pod template
// (absent without a bundle), and the volume is the deployer's ConfigMap.
func TestDeploymentTrustedCA(t *testing.T) {
	s := testSpec()
	if _, ok := Deployment(s).Spec.Template.Annotations[TrustedCAHashAnnotation]; ok {
		t.Errorf("trusted CA hash annotation without a bundle")
	}
	s.TrustedCAHash = HashTrustedCA("bundle")
	d := Deployment(s)
	if got := d.Spec.Template.Annotations[TrustedCAHashAnnotation]; got != s.TrustedCAHash || len(got) != 64 {
		t.Errorf("annotation %q, want %q", got, s.TrustedCAHash)
	}
	if HashTrustedCA("") != "" || HashTrustedCA("a") == HashTrustedCA("b") {
		t.Errorf("HashTrustedCA: no digest for no bundle, distinct ones for distinct bundles")
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name != trustedCAVolume {
			continue
		}
		cm := v.ConfigMap
		if cm == nil || cm.Name != TrustedCAConfigMap || len(cm.Items) != 1 || cm.Items[0].Key != TrustedCAKey ||
			cm.Optional == nil || !*cm.Optional {
			t.Errorf("trusted CA volume %+v, want the optional ConfigMap %s, key %s", v.VolumeSource, TrustedCAConfigMap, TrustedCAKey)
		}
		return
	}
	t.Errorf("no volume %s", trustedCAVolume)
}

// TestProxyDescribedWithoutValues: what goes into the condition and the
// events names the variables, never a value (a proxy URL may hold a
// password).
func TestProxyDescribedWithoutValues(t *testing.T) {
	p := Proxy{HTTPSProxy: "http://user:s3cret@proxy.example:3128", NoProxy: ".svc"}
	got := p.describe()
	if strings.Contains(got, "s3cret") || strings.Contains(got, "proxy.example") || !strings.Contains(got, "HTTPS_PROXY") ||
		!strings.Contains(got, "NO_PROXY") || strings.Contains(got, "HTTP_PROXY,") {
		t.Errorf("describe() = %q", got)
	}
	if got := (Proxy{}).describe(); got != "no cluster-wide proxy" {
		t.Errorf("describe() of no proxy = %q", got)
	}
}

// rootsHelperEnv makes the test binary check its system roots (see
// TestTrustedCABundleReachesGo).
const rootsHelperEnv = "DEPLOYER_TEST_SYSTEM_ROOTS"

// TestTrustedCABundleReachesGo lays out the machine-controller's files as
// the image and the kubelet do — the image's roots in
// /etc/ssl/certs/ca-certificates.crt, the injected bundle as a ConfigMap
// volume (the kubelet's ..data symlinks) at the container's mount path —
// under a temporary root, sets the container's SSL_CERT_DIR (and, as the
// image does, SSL_CERT_FILE) with its paths moved there, and asks a fresh
// process (Go reads its roots once) whether it trusts both the bundle's CA
// and the image's own root.
func TestTrustedCABundleReachesGo(t *testing.T) {
	if paths := os.Getenv(rootsHelperEnv); paths != "" {
		checkSystemRoots(t, strings.Split(paths, ","))
		return
	}
	mc := findContainer(t, Deployment(testSpec()).Spec.Template.Spec.Containers, MachineContainer)
	var mount string
	for _, m := range mc.VolumeMounts {
		if m.Name == trustedCAVolume {
			mount = m.MountPath
		}
	}
	var certDir string
	for _, e := range mc.Env {
		if e.Name == "SSL_CERT_DIR" {
			certDir = e.Value
		}
	}
	if mount == "" || certDir == "" {
		t.Fatalf("machine-controller: trusted CA mount %q, SSL_CERT_DIR %q", mount, certDir)
	}

	root := t.TempDir()
	imageRoot, injected := filepath.Join(root, "image-root.pem"), filepath.Join(root, "injected-ca.pem")
	writeCA(t, imageRoot, "image root")
	writeCA(t, injected, "corporate proxy CA")
	// The image's bundle, as hack/image and distroless place it.
	mustCopy(t, imageRoot, filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	// The ConfigMap volume: <mount>/..<timestamp>/<file>, ..data -> the
	// timestamped directory, <file> -> ..data/<file>.
	dir := filepath.Join(root, mount)
	item := ""
	for _, v := range Deployment(testSpec()).Spec.Template.Spec.Volumes {
		if v.Name == trustedCAVolume {
			item = v.ConfigMap.Items[0].Path
		}
	}
	ts := "..2025_01_02_03_04_05.000000001"
	mustCopy(t, injected, filepath.Join(dir, ts, item))
	must(t, os.Symlink(ts, filepath.Join(dir, "..data")))
	must(t, os.Symlink(filepath.Join("..data", item), filepath.Join(dir, item)))

	var dirs []string
	for d := range strings.SplitSeq(certDir, ":") {
		dirs = append(dirs, filepath.Join(root, d))
	}
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"the Deployment's environment", nil},
		{"and the image's SSL_CERT_FILE", []string{"SSL_CERT_FILE=" + filepath.Join(dir, item)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestTrustedCABundleReachesGo$", "-test.v")
			cmd.Env = append(os.Environ(), rootsHelperEnv+"="+imageRoot+","+injected, "SSL_CERT_DIR="+strings.Join(dirs, ":"))
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("a process with SSL_CERT_DIR=%s does not trust both CAs: %v\n%s", strings.Join(dirs, ":"), err, out)
			} else if !strings.Contains(string(out), rootsCheckedMarker) {
				t.Errorf("the helper process checked nothing:\n%s", out)
			}
		})
	}
}

// checkSystemRoots fails unless every CA certificate in paths verifies
// against the system roots alone.
func checkSystemRoots(t *testing.T, paths []string) {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		must(t, err)
		block, _ := pem.Decode(data)
		cert, err := x509.ParseCertificate(block.Bytes)
		must(t, err)
		if _, err := cert.Verify(x509.VerifyOptions{}); err != nil {
			t.Errorf("%s (%s) is not trusted: %v", cert.Subject.CommonName, p, err)
		}
	}
	fmt.Println(rootsCheckedMarker, len(paths))
}

const rootsCheckedMarker = "system roots checked:"

func writeCA(t *testing.T, path, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
}

func mustCopy(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(to), 0o755))
	must(t, os.WriteFile(to, data, 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
