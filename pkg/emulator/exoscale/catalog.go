package exoscale

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"
)

// The static catalogue: zones, instance types and public templates, modelled
// on the public Exoscale offering. Instance type and public template IDs are
// those the real API lists, so configurations written against it resolve
// here too; clients should look types up by family and size all the same.

// Zones are the zones of the emulated cloud, in the order GET /v2/zone lists
// them; defaultZone is the zone of the bare /v2 endpoint, as the SDK's
// default endpoint is ch-gva-2's.
var Zones = []string{"ch-gva-2", "ch-dk-2", "de-fra-1", "de-muc-1", "at-vie-1", "at-vie-2", "bg-sof-1", "hr-zag-1"}

const defaultZone = "ch-gva-2"

func zoneExists(z string) bool { return slices.Contains(Zones, z) }

const gib = int64(1) << 30

// instanceType is one size of one family. Memory is in bytes, as the API
// answers it.
type instanceType struct {
	ID     string
	Family string
	Size   string
	CPUs   int64
	Memory int64
	GPUs   int64
	Zones  []string
}

// Name is the "family.size" clients write.
func (t *instanceType) Name() string { return t.Family + "." + t.Size }

func stdType(id, family, size string, cpus int64, memory int64) instanceType {
	return instanceType{ID: id, Family: family, Size: size, CPUs: cpus, Memory: memory, Zones: Zones}
}

// gpuType has no ID of record here: the real API lists GPU types only to
// accounts authorized for them. Their IDs are derived from the name, so they
// are stable across restarts.
func gpuType(family, size string, cpus, memGiB, gpus int64, zones ...string) instanceType {
	return instanceType{ID: nameUUID("instance-type", family+"."+size), Family: family, Size: size, CPUs: cpus, Memory: memGiB * gib, GPUs: gpus, Zones: zones}
}

var instanceTypes = []instanceType{
	stdType("71004023-bb72-4a97-b1e9-bc66dfce9470", "standard", "micro", 1, 512<<20),
	stdType("b6cd1ff5-3a2f-4e9d-a4d1-8988c1191fe8", "standard", "tiny", 1, 1*gib),
	stdType("21624abb-764e-4def-81d7-9fc54b5957fb", "standard", "small", 2, 2*gib),
	stdType("b6e9d1e8-89fc-4db3-aaa4-9b4c5b1d0844", "standard", "medium", 2, 4*gib),
	stdType("c6f99499-7f59-4138-9427-a09db13af2bc", "standard", "large", 4, 8*gib),
	stdType("350dc5ea-fe6d-42ba-b6c0-efb8b75617ad", "standard", "extra-large", 4, 16*gib),
	stdType("a216b0d1-370f-4e21-a0eb-3dfc6302b564", "standard", "huge", 8, 32*gib),
	stdType("c0d3fb5d-6fdb-4a63-9361-3e5cfa8b36d0", "standard", "mega", 12, 64*gib),
	stdType("74bfaf4e-7d67-4adf-9322-12b9a36e84f7", "standard", "titan", 16, 128*gib),
	stdType("011a5079-845d-467b-a660-8685dad1cb67", "standard", "jumbo", 24, 225*gib),
	stdType("221d39c3-b2b9-4014-b32b-5d262f684eff", "cpu", "extra-large", 8, 16*gib),
	stdType("68c91810-55ed-4685-9771-00d9adf7b7c0", "cpu", "huge", 16, 32*gib),
	stdType("c2f204df-29fc-4c20-b5c4-bdb21282cecc", "cpu", "mega", 32, 64*gib),
	stdType("e1ae0088-27fd-4185-a057-075ea0b0aa02", "cpu", "titan", 40, 128*gib),
	stdType("dd6abc94-337f-4732-baff-ed745f8bd4f5", "memory", "extra-large", 2, 16*gib),
	stdType("efbf55db-01c9-4c73-973f-cecc4d26dcde", "memory", "huge", 4, 32*gib),
	stdType("306eeeae-38e9-4add-897b-4eff0b019a6d", "memory", "mega", 8, 64*gib),
	stdType("68a4780f-cc91-4df6-a735-d679318289bc", "memory", "titan", 12, 128*gib),
	gpuType("gpu2", "small", 12, 56, 1, "ch-gva-2", "ch-dk-2"),
	gpuType("gpu2", "medium", 16, 90, 2, "ch-gva-2", "ch-dk-2"),
	gpuType("gpu2", "large", 24, 120, 3, "ch-gva-2", "ch-dk-2"),
	gpuType("gpu2", "huge", 48, 225, 4, "ch-gva-2", "ch-dk-2"),
	gpuType("gpu3", "small", 12, 56, 1, "de-fra-1", "at-vie-2"),
	gpuType("gpu3", "medium", 24, 120, 2, "de-fra-1", "at-vie-2"),
	gpuType("gpu3", "large", 48, 224, 4, "de-fra-1", "at-vie-2"),
	gpuType("gpu3", "huge", 96, 448, 8, "de-fra-1", "at-vie-2"),
}

func findInstanceType(id string) *instanceType {
	for i := range instanceTypes {
		if instanceTypes[i].ID == id {
			return &instanceTypes[i]
		}
	}
	return nil
}

func findInstanceTypeByName(name string) *instanceType {
	for i := range instanceTypes {
		if instanceTypes[i].Name() == name {
			return &instanceTypes[i]
		}
	}
	return nil
}

// publicTemplate is a template Exoscale maintains, listed in every zone.
type publicTemplate struct {
	ID          string
	Name        string
	Family      string
	DefaultUser string
	Version     string
	Created     time.Time
}

func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

var publicTemplates = []publicTemplate{
	{"188e6dc9-7b29-4db4-a8af-fc6368660738", "Linux Ubuntu 24.04 LTS 64-bit", "ubuntu", "ubuntu", "24.04", date("2026-01-29T11:03:34Z")},
	{"c231ff61-20ca-4742-94e7-4fafe44b7b61", "Linux Ubuntu 22.04 LTS 64-bit", "ubuntu", "ubuntu", "22.04", date("2026-01-29T11:07:56Z")},
	{"8c54abea-0176-4c2b-a9b4-83d4b9975733", "Linux Debian 13 (Trixie) 64-bit", "debian", "debian", "13", date("2026-01-27T23:06:36Z")},
	{"8b48f0ac-52ea-414d-b042-52677d49e968", "Linux Debian 12 (Bookworm) 64-bit", "debian", "debian", "12", date("2026-01-29T11:03:50Z")},
	{"0f56a80d-b109-4c73-afbd-fbc48a6f79ba", "Rocky Linux 9 (Blue Onyx) 64-bit", "rocky linux", "rocky", "9", date("2026-01-30T08:41:22Z")},
	{"92560ced-53ba-49bb-be45-3f9eb142cc51", "Linux CentOS Stream 9 64-bit", "centos stream", "cloud-user", "9", date("2026-01-27T10:46:20Z")},
	{"9821595e-dfdc-4645-8340-8dbcfd0f4890", "Linux Fedora CoreOS 43 64-bit", "fedora coreos", "core", "43", date("2026-01-30T08:37:09Z")},
}

// publicTemplateSize is the disk public templates need (bytes).
const publicTemplateSize = 10 * gib

func findPublicTemplate(id string) *publicTemplate {
	for i := range publicTemplates {
		if publicTemplates[i].ID == id {
			return &publicTemplates[i]
		}
	}
	return nil
}

// nameUUID derives a stable version 5 style UUID from a kind and a name, for
// catalogue entries and seeded resources whose IDs must survive a restart.
func nameUUID(kind, name string) string {
	sum := sha256.Sum256([]byte("exoscale-emulator/" + kind + "/" + name))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
