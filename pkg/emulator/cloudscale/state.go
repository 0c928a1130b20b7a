package cloudscale

import "github.com/appuio/machine-api-provider/pkg/emulator/harness"

func loadState(path string) (*world, error) {
	w := newWorld()
	if ok, err := harness.LoadState(path, w); !ok || err != nil {
		return nil, err
	}
	return w, nil
}

func saveState(path string, w *world) error { return harness.SaveState(path, w) }
