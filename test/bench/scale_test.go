// Package bench measures the provider at scale against the emulator: how
// long a MachineSet takes from 0 to 100 Machines and back, how many cloud
// calls that costs, and how much memory the manager needs. Run it with
// `make bench`; it prints figures and asserts nothing about speed.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	machineset "github.com/openshift/machine-api-operator/pkg/controller/machineset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/manager"
	"github.com/appuio/machine-api-provider/pkg/testenv"
	"github.com/appuio/machine-api-provider/test/fixture"
)

const (
	replicas     = 100
	createDelay  = 300 * time.Millisecond
	providerSpec = `{"apiVersion":"machine.appuio.io/v1beta1","kind":"CloudscaleMachineProviderSpec","zone":"rma1","flavor":"flex-16-4","image":"custom:rhcos-4.19","rootVolumeSizeGB":50}`
)

func BenchmarkMachineSetZeroToHundredAndBack(b *testing.B) {
	for i := 0; i < b.N; i++ {
		run(b)
	}
}

func run(b *testing.B) {
	ctx := context.Background()
	e := fixture.Start(b, fixture.Options{Emulator: emucs.Config{BootTime: 2 * time.Second}})
	if err := e.Emulator.Harness().AddRule(harness.Rule{Route: "POST /v1/servers", Latency: harness.Duration(createDelay)}); err != nil {
		b.Fatal(err)
	}
	pid := startManagerProcess(b, e)
	startMachineSetController(b, e)

	ms := machineSet()
	if err := e.Client.Create(ctx, ms); err != nil {
		b.Fatal(err)
	}
	e.Emulator.Harness().ResetRequests()

	start := time.Now()
	scale(b, e, ms, replicas)
	waitFor(b, 10*time.Minute, "all Machines Provisioned", func() bool { return provisioned(b, e) == replicas })
	provisionTime := time.Since(start)
	createCalls := e.Emulator.Harness().Total()
	createRoutes := e.Emulator.Harness().Requests()

	// A steady-state resync: every Machine reconciled once with nothing to do.
	e.Emulator.Harness().ResetRequests()
	touchAll(b, e)
	waitFor(b, 5*time.Minute, "a cloud call for every touched Machine", func() bool {
		return e.Emulator.Harness().Total() >= replicas
	})
	settle(e)
	resyncCalls := e.Emulator.Harness().Total()
	resyncRoutes := e.Emulator.Harness().Requests()
	peakMiB := peakRSSMiB(b, pid)

	e.Emulator.Harness().ResetRequests()
	start = time.Now()
	scale(b, e, ms, 0)
	waitFor(b, 10*time.Minute, "no server left in the emulator", func() bool { return servers(e) == 0 })
	scaleDownTime := time.Since(start)
	deleteCalls := e.Emulator.Harness().Total()
	deleteRoutes := e.Emulator.Harness().Requests()

	perMachine := float64(createCalls+deleteCalls) / replicas
	perResync := float64(resyncCalls) / replicas
	b.ReportMetric(provisionTime.Seconds(), "s-to-provision-100")
	b.ReportMetric(scaleDownTime.Seconds(), "s-to-zero-servers")
	b.ReportMetric(perMachine, "calls/machine-lifecycle")
	b.ReportMetric(perResync, "calls/machine-resync")
	b.ReportMetric(peakMiB, "MiB-manager-peak-RSS")
	fmt.Printf("\nMachineSet 0 -> %d with %s added create latency (emulator, envtest):\n", replicas, createDelay)
	fmt.Printf("  time until all Machines Provisioned:  %6.1f s\n", provisionTime.Seconds())
	fmt.Printf("  cloud calls per Machine, life cycle:  %6.2f (%d to create, %d to delete)\n", perMachine, createCalls, deleteCalls)
	fmt.Printf("  cloud calls per Machine per resync:   %6.2f\n", perResync)
	fmt.Printf("  manager peak memory (VmHWM):          %6.1f MiB\n", peakMiB)
	fmt.Printf("  time from replicas=0 to zero servers: %6.1f s\n", scaleDownTime.Seconds())
	fmt.Printf("  calls by route: up %v\n                  resync %v\n                  down %v\n\n", createRoutes, resyncRoutes, deleteRoutes)
}

// startManagerProcess runs the manager as its own process, as in a cluster,
// so that its memory is its own.
func startManagerProcess(b *testing.B, e *fixture.Env) int {
	root, err := testenv.AssetsDir()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(root, "machine-api-provider")
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("%s missing: run `make build` (make bench does)", bin)
	}
	logFile, err := os.Create(filepath.Join(b.TempDir(), "manager.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "manager", "--kubeconfig", e.Kubeconfig(b), "--cloudscale-api-url", e.APIURL,
		"--namespace", fixture.Namespace, "--leader-elect=false", "--metrics-bind-address", "0",
		"--health-probe-bind-address", "0", "--capacity-publisher=false")
	cmd.Env = append(os.Environ(), "CLOUDSCALE_API_TOKEN=bench-token")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_, _ = cmd.Process.Wait()
		logFile.Close()
	})
	return cmd.Process.Pid
}

// startMachineSetController runs the machine-api-operator's MachineSet
// controller, which makes and removes the Machines.
func startMachineSetController(b *testing.B, e *fixture.Env) {
	scheme, err := manager.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = 50, 100
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{fixture.Namespace: {}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	gate, err := manager.FeatureGate()
	if err != nil {
		b.Fatal(err)
	}
	if err := machineset.Add(mgr, ctrl.Options{}, gate); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = mgr.Start(ctx) }()
	b.Cleanup(cancel)
}

func machineSet() *machinev1.MachineSet {
	labels := map[string]string{"machine.openshift.io/cluster-api-cluster": fixture.ClusterID, "machine.openshift.io/cluster-api-machineset": "bench-workers"}
	zero := int32(0)
	ms := &machinev1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-workers", Namespace: fixture.Namespace, Labels: map[string]string{"machine.openshift.io/cluster-api-cluster": fixture.ClusterID}},
		Spec: machinev1.MachineSetSpec{
			Replicas: &zero,
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.MachineTemplateSpec{ObjectMeta: machinev1.ObjectMeta{Labels: labels}},
		},
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(providerSpec)}
	return ms
}

func scale(b *testing.B, e *fixture.Env, ms *machinev1.MachineSet, n int32) {
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
	if err := e.Client.Patch(context.Background(), ms, patch); err != nil {
		b.Fatal(err)
	}
}

func provisioned(b *testing.B, e *fixture.Env) int {
	var list machinev1.MachineList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(fixture.Namespace)); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, m := range list.Items {
		if p := m.Status.Phase; p != nil && (*p == machinev1.PhaseProvisioned || *p == machinev1.PhaseRunning) {
			n++
		}
	}
	return n
}

func servers(e *fixture.Env) int {
	return len(e.Emulator.Servers())
}

// touchAll makes every Machine reconcile once, as a resync does.
func touchAll(b *testing.B, e *fixture.Env) {
	var list machinev1.MachineList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(fixture.Namespace)); err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"bench/resync":"`+strconv.FormatInt(time.Now().UnixNano(), 10)+`"}}}`))
		if err := e.Client.Patch(context.Background(), &list.Items[i], patch); err != nil {
			b.Fatal(err)
		}
	}
}

// settle waits until the cloud has had no request for two seconds.
func settle(e *fixture.Env) {
	last, quietSince := e.Emulator.Harness().Total(), time.Now()
	for time.Since(quietSince) < 2*time.Second {
		time.Sleep(100 * time.Millisecond)
		if n := e.Emulator.Harness().Total(); n != last {
			last, quietSince = n, time.Now()
		}
	}
}

func waitFor(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// peakRSSMiB is the process's peak resident memory, VmHWM in /proc.
func peakRSSMiB(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM in /proc status")
	return 0
}
