package conformance

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale/openapicheck"
)

// exoscaleCheck validates every request and answer of the Exoscale
// emulators of this package against Exoscale's OpenAPI document; nil when
// the document is not there.
var exoscaleCheck *openapicheck.Checker

// exoscaleSuiteRan is set when the Exoscale SDK suite ran to its end, so
// the coverage it must reach is checked.
var exoscaleSuiteRan atomic.Bool

func TestMain(m *testing.M) {
	flag.Parse()
	c, err := openapicheck.Load(openapicheck.DocumentPath())
	switch {
	case err == nil:
		exoscaleCheck = c
	case !errors.Is(err, openapicheck.ErrNoDocument):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if exoscaleCheck != nil && exoscaleSuiteRan.Load() {
		s := exoscaleCheck.Summary()
		fmt.Println("Exoscale SDK suite, " + s.String())
		emu, err := exoscale.New(exoscale.Config{})
		if err != nil {
			panic(err)
		}
		if missed := exoscaleCheck.Uncovered(emu.Routes()); len(missed) > 0 {
			fmt.Printf("FAIL: the SDK suite never drove %d emulated operations:\n  %s\n", len(missed), strings.Join(missed, "\n  "))
			code = max(code, 1)
		} else {
			fmt.Printf("Exoscale SDK suite: all %d emulated operations driven through the SDK and valid\n", len(emu.Routes()))
		}
	}
	os.Exit(code)
}
