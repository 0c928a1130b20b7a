package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The demo image: `make demo` in a container, for machines whose own
// kernel cannot run the local control plane (macOS; Linux without root or
// user namespaces). Its tools are those `make tools` builds, for
// linux/<arch>, static; the provider's static binary is the entrypoint.
const (
	// DemoDir holds the demo's tools (DemoBinDir, the demo's --bin-dir)
	// and the openshift/api CRDs (DemoOpenShiftAPIDir, --openshift-api).
	DemoDir             = "/opt/demo"
	DemoBinDir          = DemoDir + "/bin"
	DemoOpenShiftAPIDir = DemoDir + "/openshift-api"
)

// demoCRDDirs are the directories of the openshift/api module whose CRDs
// the demo installs (pkg/demo/crds.go names the files; operator/v1 for
// MachineConfiguration, the boot-image skew record).
var demoCRDDirs = []string{"machine/v1beta1/zz_generated.crd-manifests", "config/v1/zz_generated.crd-manifests", "operator/v1/zz_generated.crd-manifests"}

// DemoOptions describe the demo image.
type DemoOptions struct {
	// Binary is the provider's static binary for Arch.
	Binary string
	Arch   string
	// ToolsDir holds the tools; Tools names those the image takes: files
	// (executables must be static linux/Arch ELF) or directories.
	ToolsDir string
	Tools    []string
	// OpenShiftAPI is the openshift/api module's directory.
	OpenShiftAPI string
}

// BuildDemo returns the demo image: the base layer, a layer with the tools
// and CRDs under DemoDir (streamed from a file: they are hundreds of
// megabytes), and one with the binary. It runs as root: the pod runner
// chroots the pods and gives them network namespaces of their own
// (`docker run --privileged`). The demo ends at zero (--keep=false):
// nothing outside the container could reach its cluster.
func BuildDemo(o Options, d DemoOptions, scratch string) (v1.Image, error) {
	base, err := baseLayer(o.Created)
	if err != nil {
		return nil, err
	}
	entries := []entry{{name: "opt/", mode: 0o755}, {name: DemoDir[1:] + "/", mode: 0o755}, {name: DemoBinDir[1:] + "/", mode: 0o755}}
	for _, name := range d.Tools {
		src := filepath.Join(d.ToolsDir, name)
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("the demo's tool %s: %w (make demo-tools builds it)", name, err)
		}
		if st.IsDir() {
			e, err := treeEntries(src, path.Join(DemoBinDir[1:], name))
			if err != nil {
				return nil, err
			}
			entries = append(entries, e...)
			continue
		}
		mode := int64(0o644)
		if st.Mode()&0o111 != 0 {
			if err := checkStatic(src, d.Arch); err != nil {
				return nil, err
			}
			mode = 0o755
		}
		entries = append(entries, entry{name: path.Join(DemoBinDir[1:], name), mode: mode, src: src})
	}
	entries = append(entries, entry{name: DemoOpenShiftAPIDir[1:] + "/", mode: 0o755})
	for _, dir := range demoCRDDirs {
		for i := range strings.Split(dir, "/") {
			p := path.Join(DemoOpenShiftAPIDir[1:], path.Join(strings.Split(dir, "/")[:i+1]...)) + "/"
			entries = append(entries, entry{name: p, mode: 0o755})
		}
		e, err := treeEntries(filepath.Join(d.OpenShiftAPI, dir), path.Join(DemoOpenShiftAPIDir[1:], dir))
		if err != nil {
			return nil, fmt.Errorf("the openshift/api CRDs: %w", err)
		}
		entries = append(entries, e[1:]...) // its directory is above
	}
	tools, err := fileLayer(scratch, o.Created, entries)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(d.Binary, d.Arch); err != nil {
		return nil, err
	}
	app, err := fileLayer(scratch, o.Created, []entry{{name: BinaryPath[1:], mode: 0o755, src: d.Binary}})
	if err != nil {
		return nil, err
	}

	labels := o.labels("machine-api-provider-demo")
	labels["org.opencontainers.image.description"] = "make demo in a container: run with docker run --rm -it --privileged (or podman)"
	return assemble(d.Arch, o.Created, []layerOf{
		{base, baseCreatedBy, "base"},
		{tools, "machine-api-provider hack/image --demo: " + DemoBinDir + " (" + strings.Join(d.Tools, ", ") + "), " + DemoOpenShiftAPIDir, "the demo's tools"},
		{app, "machine-api-provider hack/image --demo: " + BinaryPath, "binary"},
	}, v1.Config{
		User:       "0:0",
		Entrypoint: []string{BinaryPath, "demo", "--bin-dir", DemoBinDir, "--openshift-api", DemoOpenShiftAPIDir},
		Cmd:        []string{"--keep=false"},
		WorkingDir: "/",
		Env:        []string{"PATH=" + defaultPath},
		Labels:     labels,
	})
}

// treeEntries are dir and everything below it, named under prefix, their
// modes kept (executable or not).
func treeEntries(dir, prefix string) ([]entry, error) {
	var out []entry
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		if de.IsDir() {
			out = append(out, entry{name: name + "/", mode: 0o755})
			return nil
		}
		if !de.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		out = append(out, entry{name: name, mode: mode, src: p})
		return nil
	})
	return out, err
}

// fileLayer writes entries as a layer's tarball into a file of scratch
// and returns the layer read from it.
func fileLayer(scratch string, mtime time.Time, entries []entry) (v1.Layer, error) {
	f, err := os.CreateTemp(scratch, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	if err := writeTar(f, mtime, entries); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(f.Name(), tarball.WithMediaType(types.OCILayer))
}

// elfMachines are the ELF machines of the GOARCHes an image can be for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkStatic fails unless path is a statically linked linux executable
// for arch: the image has no C library, and a dynamically linked tool (a
// bin/ built with cgo before the tools were made static) would not start.
func checkStatic(p, arch string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s: not a linux executable (%w)", p, err)
	}
	defer f.Close()
	if want, ok := elfMachines[arch]; !ok || f.Machine != want {
		return fmt.Errorf("%s is for %s, not linux/%s", p, f.Machine, arch)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: the image has no C library. Build it static (CGO_ENABLED=0, as make does since the demo image: remove its bin/.<tool>-*.stamp and run make demo-image again)", p)
		}
	}
	return nil
}

// errDemoFlags is the usage error of the demo image's flags.
var errDemoFlags = errors.New("--demo-tools needs --binary, --demo-tool and --openshift-api")
