package userdata

import (
	"encoding/json"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"time"
)

// The sandbox is the running executable started again with these variables
// in an otherwise empty environment.
const (
	envSandbox   = "MACHINE_API_PROVIDER_USERDATA_SANDBOX"
	envMemory    = "MACHINE_API_PROVIDER_USERDATA_MEMORY_BYTES"
	envCPU       = "MACHINE_API_PROVIDER_USERDATA_CPU_SECONDS"
	envMaxOutput = "MACHINE_API_PROVIDER_USERDATA_MAX_OUTPUT_BYTES"
	// sandboxArg is only there so that ps shows what the process is.
	sandboxArg = "userdata-sandbox"
)

// Exit codes of the sandbox besides 0 (a response on stdout). The Go
// runtime exits with 2 on a fatal error (out of memory, stack overflow).
const (
	exitMemory     = 3
	exitBadRequest = 4
	exitSetup      = 5
)

// maxRequest bounds what the sandbox reads: a secret holds at most 1 MiB.
const maxRequest = 16 << 20

// request is what the manager sends the sandbox on stdin.
type request struct {
	Template []byte          `json:"template"`
	Context  json.RawMessage `json:"context"`
}

// response is what the sandbox answers on stdout.
type response struct {
	Output []byte `json:"output,omitempty"`
	Error  *struct {
		Kind    Kind   `json:"kind"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

var mainCalled atomic.Bool

// Main turns this process into the user data sandbox when it was started as
// one, and returns at once otherwise. Call it first thing in main, and in
// TestMain of test packages that render templates: Render refuses to run
// in a binary that never called it, since re-executing such a binary would
// start it anew instead of a sandbox.
func Main() {
	if os.Getenv(envSandbox) == "" {
		mainCalled.Store(true)
		return
	}
	os.Exit(sandboxMain(os.Stdin, os.Stdout))
}

// sandboxMain evaluates one template under the limits its environment names.
func sandboxMain(stdin io.Reader, stdout io.Writer) int {
	// One thread evaluates: the template gets one CPU, whatever the host has.
	runtime.GOMAXPROCS(1)
	memLimit, err1 := strconv.ParseInt(os.Getenv(envMemory), 10, 64)
	cpuSeconds, err2 := strconv.ParseUint(os.Getenv(envCPU), 10, 64)
	maxOutput, err3 := strconv.Atoi(os.Getenv(envMaxOutput))
	if err1 != nil || err2 != nil || err3 != nil || memLimit <= 0 || cpuSeconds == 0 || maxOutput <= 0 {
		return exitSetup
	}
	if err := limitProcess(memLimit, cpuSeconds); err != nil {
		return exitSetup
	}
	body, err := io.ReadAll(io.LimitReader(stdin, maxRequest))
	if err != nil {
		return exitBadRequest
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return exitBadRequest
	}
	body = nil
	watchMemory(memLimit)

	var resp response
	out, e := evaluate(string(req.Template), string(req.Context))
	if e == nil {
		var b []byte
		b, err = userData([]byte(out), maxOutput)
		if err != nil {
			e, _ = err.(*Error)
		}
		resp.Output = b
	}
	if e != nil {
		resp.Error = &struct {
			Kind    Kind   `json:"kind"`
			Message string `json:"message"`
		}{e.Kind, e.msg}
	}
	if err := json.NewEncoder(stdout).Encode(resp); err != nil {
		return exitSetup
	}
	return 0
}

// inUse is the memory the Go program holds: heap objects and goroutine
// stacks (a template recursing deeply grows the latter).
var inUseSamples = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/stacks:bytes"},
}

func inUse() int64 {
	metrics.Read(inUseSamples)
	var n int64
	for _, s := range inUseSamples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += int64(s.Value.Uint64())
		}
	}
	return n
}

// watchMemory ends the process with exitMemory once the template holds more
// than limit beyond what the process held before evaluating it. The Go
// runtime collects garbage harder as it approaches that (SetMemoryLimit),
// so only memory the template keeps counts. A single allocation too large
// for the address space limit fails at once instead (a fatal "out of
// memory", exit status 2).
func watchMemory(limit int64) {
	base := inUse()
	debug.SetMemoryLimit(base + limit)
	// The stack of a runaway recursion is memory too; its overflow is fatal.
	debug.SetMaxStack(int(max(limit/2, 8<<20)))
	go func() {
		for {
			if inUse()-base > limit {
				os.Exit(exitMemory)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
}
