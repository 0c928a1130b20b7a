package userdata

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// addressSpaceSlack is what the sandbox may map beyond its memory limit:
// the runtime reserves heap address space in 64 MiB arenas and threads
// need stacks. RLIMIT_AS is only the backstop for one huge allocation,
// which the memory watchdog would see too late; the watchdog enforces the
// limit itself.
const addressSpaceSlack = 512 << 20

// limitProcess caps the sandbox's CPU time and address space. At the CPU
// limit the kernel sends SIGKILL (soft = hard, as the Go runtime ignores
// SIGXCPU).
func limitProcess(memLimit int64, cpuSeconds uint64) error {
	cpu := syscall.Rlimit{Cur: cpuSeconds, Max: cpuSeconds}
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &cpu); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	mapped, err := addressSpace()
	if err != nil {
		return err
	}
	as := uint64(mapped) + 2*uint64(memLimit) + addressSpaceSlack
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as})
}

// addressSpace is the process's virtual memory size now.
func addressSpace() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/self/statm is empty")
	}
	pages, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}

// sandboxAttr makes the kernel kill the sandbox when the manager dies, so a
// crash of the manager leaves no template running.
func sandboxAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
