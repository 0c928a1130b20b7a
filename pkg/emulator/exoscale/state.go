package exoscale

import (
	"fmt"

	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

func loadState(path string) (*world, error) {
	w := &world{}
	if ok, err := harness.LoadState(path, w); !ok || err != nil {
		return nil, err
	}
	if w.Accounts == nil {
		return nil, fmt.Errorf("state file %s is not a saved Exoscale emulator state: it has no accounts", path)
	}
	return w, nil
}

func saveState(path string, w *world) error { return harness.SaveState(path, w) }
