package exoscale_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	emu "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale/openapicheck"
)

// apiCheck validates every request and answer of every emulator the tests
// of this package start against Exoscale's OpenAPI document; nil when the
// document is not there (TestOpenAPIDocument says so).
var apiCheck *openapicheck.Checker

func TestMain(m *testing.M) {
	flag.Parse()
	c, err := openapicheck.Load(openapicheck.DocumentPath())
	switch {
	case err == nil:
		apiCheck = c
	case !errors.Is(err, openapicheck.ErrNoDocument):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if apiCheck != nil {
		code = max(code, reportCoverage())
	}
	os.Exit(code)
}

// reportCoverage prints what the run checked against the document and, when
// every test of the package ran, fails it unless every emulated operation
// was exercised and checked: a check of nothing proves nothing.
func reportCoverage() int {
	s := apiCheck.Summary()
	fmt.Println(s)
	routes := mustEmulator().Routes()
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		return 0
	}
	if testing.Short() {
		return 0
	}
	if missed := apiCheck.Uncovered(routes); len(missed) > 0 {
		fmt.Printf("FAIL: %d emulated operations were never checked against the document:\n  %s\n", len(missed), strings.Join(missed, "\n  "))
		return 1
	}
	fmt.Printf("OpenAPI check: all %d emulated operations exercised and valid\n", len(routes))
	return 0
}

func mustEmulator() *emu.Emulator {
	e, err := emu.New(emu.Config{})
	if err != nil {
		panic(err)
	}
	return e
}
