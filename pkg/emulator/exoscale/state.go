package exoscale

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

func loadState(path string) (*world, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state file: %w", err)
	}
	w := &world{}
	if err := json.Unmarshal(b, w); err != nil {
		return nil, fmt.Errorf("state file %s is not a saved Exoscale emulator state: %w", path, err)
	}
	if w.Accounts == nil {
		return nil, fmt.Errorf("state file %s is not a saved Exoscale emulator state: it has no accounts", path)
	}
	return w, nil
}

// saveState writes the world to a temporary file and renames it into place,
// so a crash leaves either the old state or the new one, never half of one.
func saveState(path string, w *world) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
