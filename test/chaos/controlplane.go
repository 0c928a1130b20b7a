package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// Namespace holds the Machines, as on OpenShift.
const Namespace = "openshift-machine-api"

// ClusterID is the run's cluster infrastructure name.
const ClusterID = "chaos-c7x9q"

// controlPlane is etcd and a kube-apiserver that can be stopped and started
// again on the same port, certificates and etcd: envtest restarts an
// APIServer it has stopped, and keeps its certificates when their directory
// is not its own temporary one.
type controlPlane struct {
	Config     *rest.Config
	Client     client.Client
	Kubeconfig string
	env        *envtest.Environment
}

func startControlPlane(t *testing.T, dir string) *controlPlane {
	t.Helper()
	certDir := filepath.Join(dir, "apiserver-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	apiLog := createLog(t, dir, "kube-apiserver.log")
	etcdLog := createLog(t, dir, "etcd.log")
	cp := &controlPlane{}
	cfg, _ := testenv.Start(t, testenv.WithMachineAPI(t), func(env *envtest.Environment) {
		cp.env = env
		api := env.ControlPlane.GetAPIServer()
		api.CertDir = certDir
		api.Out, api.Err = apiLog, apiLog
		// Its graceful shutdown waits for open connections (watches) as
		// long as a request may take, a minute by default: as long as
		// envtest waits for it to stop.
		api.Configure().Set("request-timeout", "10s")
		if env.ControlPlane.Etcd != nil {
			env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = etcdLog, etcdLog
		}
	})
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cp.Config = rest.CopyConfig(cfg)
	cp.Client, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cfg, cp.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := cp.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return cp
}

// RestartAPIServer stops the kube-apiserver (SIGTERM, as a rolling restart
// does), waits down, and starts it again on the same port and etcd. It
// returns once the API server is healthy.
func (cp *controlPlane) RestartAPIServer(down time.Duration) error {
	api := cp.env.ControlPlane.GetAPIServer()
	// A stop that times out has killed the process: start it all the same.
	stopErr := api.Stop()
	time.Sleep(down)
	var err error
	for range 3 {
		// A killed process may hold its port a moment longer.
		if err = api.Start(); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return fmt.Errorf("starting kube-apiserver again (stopping it: %v): %w", stopErr, err)
	}
	if stopErr != nil {
		return fmt.Errorf("stopping kube-apiserver (started again): %w", stopErr)
	}
	return nil
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["chaos"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["chaos"] = &clientcmdapi.Context{Cluster: "chaos", AuthInfo: "admin"}
	kc.CurrentContext = "chaos"
	return clientcmd.WriteToFile(*kc, path)
}

func createLog(t *testing.T, dir, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// startMachineSetController runs the machine-api-operator's MachineSet
// controller in this process (fixture.StartMachineSetController): it makes
// and removes the Machines, is not under test, and lives through the API
// server's restart.
func startMachineSetController(t *testing.T, cp *controlPlane, log logr.Logger) {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 50, 100
	fixture.StartMachineSetController(t, cfg, Namespace, log)
}
