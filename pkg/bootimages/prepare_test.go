package bootimages_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
)

// prepare runs Prepare on the fake release's artifact, with libguestfs
// replaced by run (the test's images are not real disks).
func prepare(t *testing.T, run func(cmd []string) (string, error), lookPath func(string) (string, error)) (*bootimages.Prepare, error) {
	t.Helper()
	cm, files := fakeRelease(t, map[string]string{"rhel-9": "9.6.20250523-0"})
	rel, err := bootimages.ParseConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	img, err := rel.Image("", "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gz := filepath.Join(dir, img.File+".gz")
	if err := os.WriteFile(gz, files["/"+img.File+".gz"], 0o644); err != nil {
		t.Fatal(err)
	}
	p := &bootimages.Prepare{
		Image: img, From: gz, Dir: filepath.Join(dir, "mirror"), Exoscale: true, Out: &bytes.Buffer{},
		Run:      func(_ context.Context, cmd []string) (string, error) { return run(cmd) },
		LookPath: lookPath,
	}
	return p, p.Do(context.Background())
}

// The Exoscale copy is made by libguestfs, command for command as the docs
// give them: the entries listed, each edited and checked; the MD5 is the
// edited file's.
func TestPrepareRunsLibguestfs(t *testing.T) {
	var ran []string
	edited := map[string]bool{}
	p, err := prepare(t, func(cmd []string) (string, error) {
		ran = append(ran, bootimages.Shell(cmd))
		switch cmd[0] {
		case "virt-ls":
			return "ostree-1.conf\nostree-2.conf\n", nil
		case "virt-edit":
			// what virt-edit does to the disk, here: the file changes
			f, err := os.OpenFile(cmd[2], os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString("edited " + cmd[len(cmd)-3])
				f.Close()
			}
			edited[cmd[len(cmd)-3]] = true
			return "", err
		case "virt-cat":
			if edited[cmd[len(cmd)-1]] {
				return "options ignition.platform.id=exoscale ignition.firstboot", nil
			}
			return "options ignition.platform.id=openstack", nil
		}
		return "", fmt.Errorf("unexpected %v", cmd)
	}, func(s string) (string, error) { return "/usr/bin/" + s, nil })
	if err != nil {
		t.Fatal(err)
	}
	exo := filepath.Join(p.Dir, "rhcos-9.6.20250523-0-exoscale.x86_64.qcow2")
	want := []string{
		"virt-ls -a " + exo + " -m /dev/sda3 /loader/entries/",
		"virt-edit -a " + exo + " -m /dev/sda3 /loader/entries/ostree-1.conf -e 's/ignition\\.platform\\.id=openstack/ignition.platform.id=exoscale/'",
		"virt-cat -a " + exo + " -m /dev/sda3 /loader/entries/ostree-1.conf",
		"virt-edit -a " + exo + " -m /dev/sda3 /loader/entries/ostree-2.conf -e 's/ignition\\.platform\\.id=openstack/ignition.platform.id=exoscale/'",
		"virt-cat -a " + exo + " -m /dev/sda3 /loader/entries/ostree-2.conf",
	}
	if strings.Join(ran, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ran\n%s\nwant\n%s", strings.Join(ran, "\n"), strings.Join(want, "\n"))
	}
	b, err := os.ReadFile(exo)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(exo + ".md5")
	if err != nil || string(sum) != fmt.Sprintf("%x  %s\n", md5.Sum(b), filepath.Base(exo)) {
		t.Fatalf("md5 file %q, %v", sum, err)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "rhcos-9.6.20250523-0-openstack.x86_64.qcow2")); err != nil {
		t.Fatalf("no OpenStack image for cloudscale.ch: %v", err)
	}
}

// Without libguestfs, Prepare says how to install it and gives the
// commands; an edit that did not take is an error.
func TestPrepareWithoutLibguestfs(t *testing.T) {
	_, err := prepare(t, func(cmd []string) (string, error) { return "", errors.New("must not run") },
		func(s string) (string, error) { return "", errors.New("not found") })
	if !errors.Is(err, bootimages.ErrNoLibguestfs) || !strings.Contains(err.Error(), "apt-get install libguestfs-tools") ||
		!strings.Contains(err.Error(), "virt-edit -a ") || !strings.Contains(err.Error(), "md5sum rhcos-9.6.20250523-0-exoscale.x86_64.qcow2") {
		t.Fatalf("without libguestfs: %v", err)
	}
	_, err = prepare(t, func(cmd []string) (string, error) {
		if cmd[0] == "virt-ls" {
			return "ostree-1.conf\n", nil
		}
		return "options ignition.platform.id=openstack", nil
	}, func(s string) (string, error) { return s, nil })
	if err == nil || !strings.Contains(err.Error(), "has no ignition.platform.id=exoscale after the edit") {
		t.Fatalf("an edit that did not take: %v", err)
	}
}
