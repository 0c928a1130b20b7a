package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LoadState reads an emulated world saved by SaveState into w. It reports
// false, without error, when there is no such file yet.
func LoadState(path string, w any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading state file: %w", err)
	}
	if err := json.Unmarshal(b, w); err != nil {
		return false, fmt.Errorf("state file %s is not a saved emulator state: %w", path, err)
	}
	return true, nil
}

// SaveState writes an emulated world to a temporary file and renames it
// into place, so a crash leaves either the old state or the new one, never
// half of one.
func SaveState(path string, w any) error {
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
