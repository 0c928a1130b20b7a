package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
)

// TestBootImagesDocsGiveTheCodesCommands: the manual path of
// docs/boot-images.md runs libguestfs command for command as `images
// prepare` does, and records the skew as the provider would.
func TestBootImagesDocsGiveTheCodesCommands(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "boot-images.md"))
	must(t, err)
	doc := string(raw)
	const image, entry = "rhcos-9.6.20250523-0-exoscale.x86_64.qcow2", "ostree-1.conf"
	for _, cmd := range [][]string{
		bootimages.ListEntriesCommand(image),
		bootimages.EditEntryCommand(image, entry),
		bootimages.ShowEntryCommand(image, entry),
	} {
		if line := bootimages.Shell(cmd); !strings.Contains(doc, line) {
			t.Errorf("docs/boot-images.md does not give the command\n  %s", line)
		}
	}
	if line := bootimages.ClearCommand("9.6.20250523-0"); !strings.Contains(doc, line) {
		t.Errorf("docs/boot-images.md does not give the skew record's command\n  %s", line)
	}
}
