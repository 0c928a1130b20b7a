package userdata

import (
	"fmt"
	"strings"
	"time"
)

// Kind says why a render failed.
type Kind string

// The template's own errors (an *Error): what the evaluator says of the
// template, the same on every host and every attempt.
const (
	// KindTemplate: the template does not parse or fails to evaluate.
	KindTemplate Kind = "Template"
	// KindImport: the template imports something.
	KindImport Kind = "Import"
	// KindOutput: the template's result is too large or not usable.
	KindOutput Kind = "Output"
	// KindInput: the template and its context are more than a sandbox
	// takes.
	KindInput Kind = "Input"
)

// The sandbox's failures (a *SandboxError): the sandbox ended without an
// answer. A template that loops or allocates without end ends so, but so
// does a sound one on a host starved of CPU or memory, or whose sandbox the
// kernel's OOM killer picked: the render is worth another attempt.
const (
	// KindTimeout: the template did not finish in time.
	KindTimeout Kind = "Timeout"
	// KindMemory: the sandbox ran out of memory (its limit, or the
	// host's).
	KindMemory Kind = "Memory"
	// KindSignal: a signal ended the sandbox (the OOM killer's SIGKILL).
	KindSignal Kind = "Signal"
	// KindExit: the sandbox exited without an answer.
	KindExit Kind = "Exit"
	// KindStart: the sandbox could not start, or answered nothing usable.
	KindStart Kind = "Start"
)

// Error is a template at fault: the Machine that refers to it cannot be
// created until the secret is fixed. Its message never quotes the template,
// the secret's data or the output.
type Error struct {
	Kind Kind
	msg  string
}

func (e *Error) Error() string { return e.msg }

// SandboxError is a render whose sandbox ended without an answer: a
// timeout, memory, a signal, an exit status. It may be the template's
// doing or the host's; another attempt tells. Its message never quotes the
// template either.
type SandboxError struct {
	Kind Kind
	msg  string
}

func (e *SandboxError) Error() string { return e.msg }

// Reason is the kind in lower case, for metrics ("timeout", "signal").
func (e *SandboxError) Reason() string { return strings.ToLower(string(e.Kind)) }

func templateError(where string) *Error {
	return &Error{Kind: KindTemplate, msg: "the user data is neither JSON nor a valid Jsonnet template: " + where + " (details are withheld: they may contain secrets)"}
}

// maxQuotedImport bounds how much of an import path an error repeats.
const maxQuotedImport = 100

func importError(keyword, path string) *Error {
	if len(path) > maxQuotedImport {
		path = path[:maxQuotedImport] + "..."
	}
	return &Error{Kind: KindImport, msg: fmt.Sprintf("imports are not allowed in user data templates: %s %q", keyword, path)}
}

func timeoutError(d time.Duration) *SandboxError {
	return &SandboxError{Kind: KindTimeout, msg: fmt.Sprintf("the user data template did not finish within %s", d)}
}

func memoryError(limit int64) *SandboxError {
	return &SandboxError{Kind: KindMemory, msg: fmt.Sprintf("the user data template exceeded its memory limit of %s", formatBytes(limit))}
}

func outputError(format string, args ...any) *Error {
	return &Error{Kind: KindOutput, msg: fmt.Sprintf(format, args...)}
}

func signalError(sig string) *SandboxError {
	return &SandboxError{Kind: KindSignal, msg: "the user data sandbox was killed by " + sig}
}

func exitError(status int) *SandboxError {
	return &SandboxError{Kind: KindExit, msg: fmt.Sprintf("the user data sandbox exited with status %d without an answer", status)}
}

func startError(format string, args ...any) *SandboxError {
	return &SandboxError{Kind: KindStart, msg: fmt.Sprintf(format, args...)}
}

// formatBytes writes a limit the way people read it: 256 MiB, 2 GiB.
func formatBytes(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
