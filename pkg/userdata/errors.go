package userdata

import (
	"fmt"
	"time"
)

// Kind says what was wrong with a template.
type Kind string

const (
	// KindTemplate: the template does not parse or fails to evaluate.
	KindTemplate Kind = "Template"
	// KindImport: the template imports something.
	KindImport Kind = "Import"
	// KindTimeout: the template did not finish in time.
	KindTimeout Kind = "Timeout"
	// KindMemory: the template needed more memory than allowed.
	KindMemory Kind = "Memory"
	// KindOutput: the template's result is too large or not usable.
	KindOutput Kind = "Output"
	// KindCrash: the sandbox died for another reason while evaluating it.
	KindCrash Kind = "Crash"
)

// Error is a template at fault: the Machine that refers to it cannot be
// created until the secret is fixed. Its message never quotes the template,
// the secret's data or the output.
type Error struct {
	Kind Kind
	msg  string
}

func (e *Error) Error() string { return e.msg }

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

func timeoutError(d time.Duration) *Error {
	return &Error{Kind: KindTimeout, msg: fmt.Sprintf("the user data template did not finish within %s", d)}
}

func memoryError(limit int64) *Error {
	return &Error{Kind: KindMemory, msg: fmt.Sprintf("the user data template exceeded its memory limit of %s", formatBytes(limit))}
}

func outputError(format string, args ...any) *Error {
	return &Error{Kind: KindOutput, msg: fmt.Sprintf(format, args...)}
}

func crashError(how string) *Error {
	return &Error{Kind: KindCrash, msg: "the user data template stopped its sandbox (" + how + ")"}
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
