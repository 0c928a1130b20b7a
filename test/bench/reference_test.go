package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
)

// The CPU time a piece of work takes on a busy machine depends on what the
// machine's other work does meanwhile: it shares the cores' caches and has
// the scheduler switch more. A reference process does the same small piece
// of work over and over beside the manager, a few percent of a core: how
// much CPU time a piece takes it in a phase says how much the machine
// slowed work down in that phase, and the manager's CPU in units of the
// reference's pieces is a figure the machine's load moves much less than
// its CPU-seconds (docs/benchmarks.md shows both).

// referenceEnv makes the test binary the reference process.
const referenceEnv = "BENCH_REFERENCE"

// referencePause is the pause between two pieces: the reference takes a
// few percent of a core.
const referencePause = 50 * time.Millisecond

// TestReferenceWork is the reference process's loop, run only by the
// benchmarks (startReference): it decodes, encodes and copies a list of
// Machines, as a controller does with what it watches, and says "piece"
// after each.
func TestReferenceWork(t *testing.T) {
	if os.Getenv(referenceEnv) == "" {
		t.Skip("the benchmarks' reference work; they run it themselves")
	}
	raw := referenceList()
	for {
		referencePiece(raw)
		fmt.Println("piece")
		time.Sleep(referencePause)
	}
}

// referenceList is 100 Machines with a provider spec, as JSON.
func referenceList() []byte {
	var list machinev1.MachineList
	for i := range 100 {
		m := machinev1.Machine{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("bench-workers-%05d", i), Namespace: "openshift-machine-api",
			Labels:      map[string]string{"machine.openshift.io/cluster-api-cluster": "test-cluster-x7k2p", "machine.openshift.io/cluster-api-machineset": "bench-workers"},
			Annotations: map[string]string{"machine.openshift.io/instance-state": "running"},
		}}
		m.Spec.ProviderSpec.Value = &kruntime.RawExtension{Raw: []byte(clouds["cloudscale"].spec)}
		id := fmt.Sprintf("cloudscale://%08d-0000-4000-8000-000000000000", i)
		m.Spec.ProviderID = &id
		list.Items = append(list.Items, m)
	}
	raw, err := json.Marshal(list)
	if err != nil {
		panic(err)
	}
	return raw
}

// referencePiece is one piece of the reference's work.
func referencePiece(raw []byte) {
	var list machinev1.MachineList
	if err := json.Unmarshal(raw, &list); err != nil {
		panic(err)
	}
	if _, err := json.Marshal(list.DeepCopy()); err != nil {
		panic(err)
	}
}

// benchReference is the benchmark's reference process (nil: none).
var benchReference *reference

// reference is the running reference process.
type reference struct {
	pid    int
	pieces atomic.Int64
}

// startReference starts the reference process beside the benchmark.
func startReference(b testing.TB) *reference {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReferenceWork$", "-test.count", "1", "-test.timeout", "0")
	cmd.Env = append(os.Environ(), referenceEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r := &reference{pid: cmd.Process.Pid}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "piece" {
				r.pieces.Add(1)
			}
		}
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return r
}

// referenceSample is the reference's CPU-seconds and pieces at a moment.
type referenceSample struct {
	cpu    float64
	pieces int64
}

func (r *reference) sample() referenceSample {
	if r == nil {
		return referenceSample{}
	}
	// The count first: a piece counted has its CPU in the sample.
	n := r.pieces.Load()
	return referenceSample{cpu: processCPU(r.pid), pieces: n}
}

// perPiece is the reference's CPU-seconds per piece between two samples;
// 0 when it did none.
func perPiece(a, b referenceSample) float64 {
	if b.pieces <= a.pieces {
		return 0
	}
	return (b.cpu - a.cpu) / float64(b.pieces-a.pieces)
}

func (s referenceSample) String() string {
	return strconv.FormatInt(s.pieces, 10)
}
