//go:build unix && !linux

package userdata

import "syscall"

// limitProcess caps the sandbox's CPU time. Outside Linux the address space
// is not capped: the memory watchdog alone bounds memory.
func limitProcess(_ int64, cpuSeconds uint64) error {
	cpu := syscall.Rlimit{Cur: cpuSeconds, Max: cpuSeconds}
	return syscall.Setrlimit(syscall.RLIMIT_CPU, &cpu)
}

func sandboxAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
