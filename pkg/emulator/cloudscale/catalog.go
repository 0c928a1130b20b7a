package cloudscale

// The static catalogue: regions with their zones, flavors and public images,
// modelled on the public cloudscale.ch offering. Flavor slugs read
// <family>-<memory GB>-<vCPUs>[-<GPUs>-<scratch GB>]; clients must not parse
// them, and the emulator does not either: every figure is a field here.

type region struct {
	Slug  string
	Zones []string
}

var regions = []region{
	{Slug: "rma", Zones: []string{"rma1"}},
	{Slug: "lpg", Zones: []string{"lpg1"}},
}

const defaultZone = "rma1"

func zoneExists(zone string) bool { return regionOfZone(zone) != "" }

func regionOfZone(zone string) string {
	for _, r := range regions {
		for _, z := range r.Zones {
			if z == zone {
				return r.Slug
			}
		}
	}
	return ""
}

type gpu struct {
	Name         string `json:"name"`
	Count        int    `json:"count"`
	VRAMPerGPUGB int    `json:"vram_per_gpu_gb"`
	TotalVRAMGB  int    `json:"total_vram_gb"`
}

type flavor struct {
	Slug      string
	Name      string
	VCPUCount int
	MemoryGB  int
	GPU       *gpu
	Zones     []string
}

var allZones = []string{"rma1", "lpg1"}

func newFlavor(slug, name string, vcpus, memGB int) flavor {
	return flavor{Slug: slug, Name: name, VCPUCount: vcpus, MemoryGB: memGB, Zones: allZones}
}

func newGPUFlavor(slug, name string, vcpus, memGB, gpus int) flavor {
	f := newFlavor(slug, name, vcpus, memGB)
	f.GPU = &gpu{Name: "NVIDIA RTX PRO 6000 Max-Q", Count: gpus, VRAMPerGPUGB: 96, TotalVRAMGB: 96 * gpus}
	f.Zones = []string{"rma1"}
	return f
}

var flavors = []flavor{
	newFlavor("flex-4-1", "Flex-4-1", 1, 4),
	newFlavor("flex-4-2", "Flex-4-2", 2, 4),
	newFlavor("flex-4-4", "Flex-4-4", 4, 4),
	newFlavor("flex-8-2", "Flex-8-2", 2, 8),
	newFlavor("flex-8-4", "Flex-8-4", 4, 8),
	newFlavor("flex-12-3", "Flex-12-3", 3, 12),
	newFlavor("flex-16-4", "Flex-16-4", 4, 16),
	newFlavor("flex-16-8", "Flex-16-8", 8, 16),
	newFlavor("flex-24-6", "Flex-24-6", 6, 24),
	newFlavor("flex-32-8", "Flex-32-8", 8, 32),
	newFlavor("flex-32-16", "Flex-32-16", 16, 32),
	newFlavor("flex-48-12", "Flex-48-12", 12, 48),
	newFlavor("flex-64-16", "Flex-64-16", 16, 64),
	newFlavor("flex-96-24", "Flex-96-24", 24, 96),
	newFlavor("plus-8-2", "Plus-8-2", 2, 8),
	newFlavor("plus-16-4", "Plus-16-4", 4, 16),
	newFlavor("plus-24-6", "Plus-24-6", 6, 24),
	newFlavor("plus-32-8", "Plus-32-8", 8, 32),
	newFlavor("plus-48-12", "Plus-48-12", 12, 48),
	newFlavor("plus-64-16", "Plus-64-16", 16, 64),
	newFlavor("plus-96-24", "Plus-96-24", 24, 96),
	newFlavor("plus-128-32", "Plus-128-32", 32, 128),
	newFlavor("plus-192-48", "Plus-192-48", 48, 192),
	newFlavor("plus-192-96", "Plus-192-96", 96, 192),
	newGPUFlavor("gpu2-128-16-1-200", "GPU2-128-16-1-200", 16, 128, 1),
	newGPUFlavor("gpu2-256-32-2-400", "GPU2-256-32-2-400", 32, 256, 2),
	newGPUFlavor("gpu2-512-64-4-800", "GPU2-512-64-4-800", 64, 512, 4),
}

func findFlavor(slug string) *flavor {
	for i := range flavors {
		if flavors[i].Slug == slug {
			return &flavors[i]
		}
	}
	return nil
}

type image struct {
	Slug            string
	Name            string
	OperatingSystem string
	DefaultUsername string
	MinVolumeGB     int
}

var images = []image{
	{"debian-11", "Debian 11 (2021-08-14)", "Debian", "debian", 10},
	{"debian-12", "Debian 12 (2023-06-10)", "Debian", "debian", 10},
	{"debian-13", "Debian 13 (2025-08-09)", "Debian", "debian", 10},
	{"ubuntu-22.04", "Ubuntu 22.04 LTS", "Ubuntu", "ubuntu", 10},
	{"ubuntu-24.04", "Ubuntu 24.04 LTS", "Ubuntu", "ubuntu", 10},
	{"rocky-9", "Rocky Linux 9", "Rocky Linux", "rocky", 10},
	{"fedora-coreos-stable", "Fedora CoreOS (stable)", "Fedora CoreOS", "core", 10},
	{"rhcos-4.18", "Red Hat Enterprise Linux CoreOS 4.18", "RHCOS", "core", 16},
	{"rhcos-4.19", "Red Hat Enterprise Linux CoreOS 4.19", "RHCOS", "core", 16},
}

func findImage(slug string) *image {
	for i := range images {
		if images[i].Slug == slug {
			return &images[i]
		}
	}
	return nil
}

// Public DNS resolvers that subnets get unless told otherwise.
var defaultDNSServers = []string{"5.102.144.101", "5.102.144.102"}
