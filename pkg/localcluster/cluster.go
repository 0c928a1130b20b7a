// Package localcluster runs a Kubernetes control plane on this machine from
// the binaries `make tools` builds: etcd and kube-apiserver (through
// controller-runtime's envtest, which also makes the certificates),
// kube-controller-manager, kube-scheduler and kwok, which plays the kubelet
// of every Node marked for it. The demo and the end-to-end tests stand the
// whole autoscaling loop up on it. RunNode and RunPod (pod.go) play the
// kubelet of this machine for real binaries: a Deployment's pod run with
// exactly its commands, environment, mounts and service account.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KwokNodeAnnotation marks the Nodes kwok keeps Ready; without it a Node
// stops heartbeating and the node controller finds it NotReady.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Options configure the control plane.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kwok and kwok-stages.yaml.
	BinDir string
	// CRDs to install: files or directories.
	CRDs []string
	// Dir receives the kubeconfig and each process's log.
	Dir string
	// NodeMonitorGracePeriod is how long a Node may miss heartbeats before
	// it is NotReady (default 20s; Kubernetes' own is 40s).
	NodeMonitorGracePeriod time.Duration
	// APIServerArgs are further kube-apiserver flags, by name without the
	// dashes; each value is appended (e.g. "audit-log-path": {path}).
	APIServerArgs map[string][]string
}

// Cluster is a running control plane.
type Cluster struct {
	Config     *rest.Config
	Kubeconfig string
	dir        string
	env        *envtest.Environment
	procs      []*Process
}

// Start starts the control plane and returns once the API server answers.
// Stop it with Stop, also after an error.
func Start(o Options) (*Cluster, error) {
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 20 * time.Second
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run `make tools`", bin, o.BinDir)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{dir: o.Dir}
	c.env = &envtest.Environment{
		BinaryAssetsDirectory:    o.BinDir,
		CRDDirectoryPaths:        o.CRDs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	c.env.ControlPlane.GetAPIServer().Path = filepath.Join(o.BinDir, "kube-apiserver")
	args := c.env.ControlPlane.GetAPIServer().Configure()
	for name, values := range o.APIServerArgs {
		args.Append(name, values...)
	}
	c.env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(o.BinDir, "etcd")}
	cfg, err := c.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	c.Config = cfg
	if err := c.writeKubeconfig(); err != nil {
		return c, err
	}

	certDir := c.env.ControlPlane.GetAPIServer().CertDir
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	steps := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
			// Service account tokens are left out: envtest's API server does
			// not require them, and kwok's pods need none.
			"--controllers=*,-serviceaccount-token",
			"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
			"--node-monitor-grace-period=" + o.NodeMonitorGracePeriod.String(),
			"--node-monitor-period=2s",
		}},
		{"kube-scheduler", []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0"}},
		{"kwok", []string{
			"--kubeconfig=" + c.Kubeconfig, "--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
			"--config=" + bin("kwok-stages.yaml"),
		}},
	}
	for _, s := range steps {
		if _, err := c.StartProcess(s.name, bin(s.name), s.args, nil); err != nil {
			return c, err
		}
	}
	return c, nil
}

// StartProcess runs a program beside the control plane, logging to
// <Dir>/<name>.log; Stop stops it.
func (c *Cluster) StartProcess(name, path string, args, env []string) (*Process, error) {
	p, err := startProcess(name, path, args, env, filepath.Join(c.dir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// Stop stops every process, newest first, then the API server and etcd.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].Stop(10*time.Second))
	}
	if c.env != nil {
		errs = append(errs, c.env.Stop())
	}
	return errors.Join(errs...)
}

// WaitReady waits until the API server answers /readyz.
func (c *Cluster) WaitReady(ctx context.Context) error {
	return waitAPI(ctx, c.Config)
}
