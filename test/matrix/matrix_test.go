package matrix

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/appuio/machine-api-provider/pkg/controllers/deployer"
	"github.com/appuio/machine-api-provider/pkg/demo"
	"github.com/appuio/machine-api-provider/pkg/testenv"
)

// TestMatrix runs every era of MATRIX_ERAS ("4.16 4.18 4.21"; `make
// matrix` sets it from the Makefile) on every cloud (CLOUD: one of them)
// and prints the table. An era newer than any release the deployer knows
// (e.g. 5.1, with its binaries in bin/mao-5.1) checks that the newest
// known release's flags work on it and that the deployer says so.
func TestMatrix(t *testing.T) {
	if os.Getenv("MATRIX") == "" {
		t.Skip("`make matrix` runs this (MATRIX=1): it builds the controllers of every era first")
	}
	// the test's own clients log nothing worth reading (warnings about
	// the deprecated master node label of the manifests)
	ctrllog.SetLogger(logr.Discard())
	provider := os.Getenv("MATRIX_PROVIDER")
	if provider == "" {
		t.Fatal("MATRIX_PROVIDER names no binary: the provider image's static build (make matrix sets it)")
	}
	if provider, _ = filepath.Abs(provider); filepath.Base(provider) != "machine-api-provider" {
		t.Fatalf("MATRIX_PROVIDER is %s: the image's binary is /machine-api-provider, so the file must be named machine-api-provider", provider)
	}
	bin, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	var eras []era
	for _, name := range strings.Fields(os.Getenv("MATRIX_ERAS")) {
		rel, fit := deployer.ForVersion(name + ".0")
		if fit != deployer.FitKnown && fit != deployer.FitNewer {
			t.Fatalf("era %s: %s", name, fit)
		}
		if fit == deployer.FitKnown && rel.Matrix == "" {
			t.Fatalf("era %s has no Matrix version in releases.go: it is covered by the era %q (none: table only)", name, rel.MatrixEra)
		}
		e := era{name: name, version: name + ".0", dir: filepath.Join(bin, "mao-"+name)}
		if _, err := os.Stat(filepath.Join(e.dir, "machineset-controller")); err != nil {
			t.Fatalf("era %s: %v: run `make mao-%s`", name, err, name)
		}
		eras = append(eras, e)
	}
	if len(eras) == 0 {
		t.Fatal("MATRIX_ERAS names no era")
	}
	clouds := demo.Clouds
	if c := os.Getenv("CLOUD"); c != "" {
		clouds = []string{c}
	}
	var results []*result
	for _, e := range eras {
		for _, cloud := range clouds {
			t.Run(e.name+"/"+cloud, func(t *testing.T) {
				r := run(t, e, cloud, provider)
				results = append(results, r)
				if !r.passed() {
					t.Errorf("%s on %s:\n%s", e.name, cloud, table([]*result{r}))
				}
			})
		}
	}
	fmt.Printf("\nmake matrix: the Machine API controllers of each era (their own binaries) beside the provider, per cloud\n\n%s", table(results))
}
