package bootimages

import (
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"
)

// Exoscale boots RHCOS's OpenStack image only with Exoscale's platform ID:
// RHCOS ships no Exoscale artifact, so the OpenStack qcow2 gets
// ignition.platform.id=exoscale in its boot loader entries (Ignition then
// reads the user data from Exoscale's metadata service). The edit is
// libguestfs's (Debian's libguestfs-tools: virt-ls, virt-edit, virt-cat),
// never the provider's own filesystem code. RHCOS's boot partition is the
// third (BIOS-BOOT, EFI-SYSTEM, boot, root), its entries
// /loader/entries/*.conf there.

// BootPartition is RHCOS's boot partition as libguestfs names it.
const BootPartition = "/dev/sda3"

// PlatformEdit is virt-edit's expression: the OpenStack platform ID
// becomes Exoscale's.
const PlatformEdit = `s/ignition\.platform\.id=openstack/ignition.platform.id=exoscale/`

// ListEntriesCommand lists the boot loader entries of image.
func ListEntriesCommand(image string) []string {
	return []string{"virt-ls", "-a", image, "-m", BootPartition, "/loader/entries/"}
}

// EditEntryCommand sets the platform ID in one entry of image.
func EditEntryCommand(image, entry string) []string {
	return []string{"virt-edit", "-a", image, "-m", BootPartition, "/loader/entries/" + entry, "-e", PlatformEdit}
}

// ShowEntryCommand prints one entry of image.
func ShowEntryCommand(image, entry string) []string {
	return []string{"virt-cat", "-a", image, "-m", BootPartition, "/loader/entries/" + entry}
}

// Shell quotes a command for a shell, for the docs and messages.
func Shell(cmd []string) string {
	out := make([]string, len(cmd))
	for i, a := range cmd {
		if a == "" || strings.ContainsAny(a, " \\'\"$*?;&|<>()[]{}`!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// Prepare makes the mirror's files of img in dir: the decompressed
// OpenStack qcow2 (cloudscale.ch's, checked against the stream's
// uncompressed-sha256) and, with exoscale, the copy prepared for Exoscale
// (the platform ID set by libguestfs run through run) and its .md5. The
// compressed artifact is read from from, or downloaded (and its sha256
// checked) by stream-metadata-go when from is "".
type Prepare struct {
	Image    *Image
	From     string
	Dir      string
	Exoscale bool
	// Run runs a command and returns its output; LookPath finds a tool.
	Run      func(ctx context.Context, cmd []string) (string, error)
	LookPath func(string) (string, error)
	Out      io.Writer
}

// ErrNoLibguestfs is Prepare's error when virt-edit is not installed; the
// message holds the commands to run instead.
var ErrNoLibguestfs = errors.New("libguestfs-tools are not installed")

// Do prepares the files.
func (p *Prepare) Do(ctx context.Context) error {
	if p.Run == nil {
		p.Run = func(ctx context.Context, cmd []string) (string, error) {
			out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput()
			if err != nil {
				return string(out), fmt.Errorf("%s: %w: %s", Shell(cmd), err, strings.TrimSpace(string(out)))
			}
			return string(out), nil
		}
	}
	if p.LookPath == nil {
		p.LookPath = exec.LookPath
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	qcow2 := filepath.Join(p.Dir, p.Image.File)
	if err := p.decompress(qcow2); err != nil {
		return err
	}
	fmt.Fprintf(p.Out, "%s: the OpenStack image, as cloudscale.ch imports it (sha256 %s)\n", qcow2, p.Image.UncompressedSHA256)
	if !p.Exoscale {
		return nil
	}
	exo := filepath.Join(p.Dir, strings.Replace(p.Image.File, "-openstack.", "-exoscale.", 1))
	if err := copyFile(qcow2, exo); err != nil {
		return err
	}
	for _, tool := range []string{"virt-ls", "virt-edit", "virt-cat"} {
		if _, err := p.LookPath(tool); err != nil {
			return fmt.Errorf("%w (%s: %v): install them (Debian, Ubuntu: apt-get install libguestfs-tools), or run:\n  %s\n  %s   # for each entry listed\n  md5sum %s > %s.md5",
				ErrNoLibguestfs, tool, err, Shell(ListEntriesCommand(exo)), Shell(EditEntryCommand(exo, "<entry>.conf")), filepath.Base(exo), filepath.Base(exo))
		}
	}
	out, err := p.Run(ctx, ListEntriesCommand(exo))
	if err != nil {
		return err
	}
	var entries []string
	for _, l := range strings.Fields(out) {
		if strings.HasSuffix(l, ".conf") {
			entries = append(entries, l)
		}
	}
	if len(entries) == 0 {
		return fmt.Errorf("%s lists no boot loader entry in %s: is it RHCOS's OpenStack image?", Shell(ListEntriesCommand(exo)), exo)
	}
	for _, e := range entries {
		if _, err := p.Run(ctx, EditEntryCommand(exo, e)); err != nil {
			return err
		}
		shown, err := p.Run(ctx, ShowEntryCommand(exo, e))
		if err != nil {
			return err
		}
		if !strings.Contains(shown, "ignition.platform.id=exoscale") {
			return fmt.Errorf("boot loader entry %s of %s has no ignition.platform.id=exoscale after the edit", e, exo)
		}
	}
	sum, err := md5File(exo)
	if err != nil {
		return err
	}
	if err := os.WriteFile(exo+".md5", []byte(sum+"  "+filepath.Base(exo)+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(p.Out, "%s: prepared for Exoscale (ignition.platform.id=exoscale in %s), MD5 %s in %s.md5\n", exo, strings.Join(entries, ", "), sum, exo)
	return nil
}

// decompress writes the artifact's qcow2 to dst, checking both checksums.
func (p *Prepare) decompress(dst string) error {
	var src io.Reader
	if p.From != "" {
		f, err := os.Open(p.From)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		src = io.TeeReader(f, h)
		if err := p.writeQCOW2(src, dst); err != nil {
			return err
		}
		if got := fmt.Sprintf("%x", h.Sum(nil)); got != p.Image.SHA256 {
			return fmt.Errorf("%s has sha256 %s, the stream says %s", p.From, got, p.Image.SHA256)
		}
		return nil
	}
	// stream-metadata-go downloads and checks the compressed sha256
	gz := dst + ".gz"
	f, err := os.Create(gz)
	if err != nil {
		return err
	}
	a := stream.Artifact{Location: p.Image.Location, Sha256: p.Image.SHA256}
	if err := a.Fetch(f); err != nil {
		f.Close()
		return fmt.Errorf("downloading %s: %w", p.Image.Location, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	defer os.Remove(gz)
	in, err := os.Open(gz)
	if err != nil {
		return err
	}
	defer in.Close()
	return p.writeQCOW2(in, dst)
}

func (p *Prepare) writeQCOW2(gzipped io.Reader, dst string) error {
	zr, err := gzip.NewReader(gzipped)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), zr); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != p.Image.UncompressedSHA256 {
		return fmt.Errorf("the decompressed image has sha256 %s, the stream's uncompressed-sha256 is %s", got, p.Image.UncompressedSHA256)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func md5File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := md5.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
