package bench

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/bootimages"
	"github.com/appuio/machine-api-provider/pkg/cloud"
	cscloud "github.com/appuio/machine-api-provider/pkg/cloud/cloudscale"
	exocloud "github.com/appuio/machine-api-provider/pkg/cloud/exoscale"
	emucs "github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
	"github.com/appuio/machine-api-provider/test/fixture"
)

// importTime is how long the emulated cloud works on an import or a
// registration after the download (cloudscale.ch: the import's
// in_progress; Exoscale: each operation).
const importTime = 2 * time.Second

// BenchmarkBootImageImport imports a release's images (rhel-9 and
// rhel-10) into two zones of each cloud of CLOUD, as the boot image
// controller does, through the provider's clients with their production
// poll intervals (cloudscale.ch 5 s, Exoscale 3 s), from a mirror the
// benchmark serves (BENCH_IMAGE_MIB of payload per image, default 64), and
// prints per image the cloud calls by route and the wall time.
func BenchmarkBootImageImport(b *testing.B) {
	mib := 64
	if v := os.Getenv("BENCH_IMAGE_MIB"); v != "" {
		if _, err := fmt.Sscan(v, &mib); err != nil || mib < 0 {
			b.Fatalf("BENCH_IMAGE_MIB=%q: want a number of MiB", v)
		}
	}
	for _, name := range strings.Split(env("CLOUD", fixture.Cloudscale), ",") {
		name = strings.TrimSpace(name)
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchImport(b, name, mib)
			}
		})
	}
}

func benchImport(b *testing.B, name string, mib int) {
	// a payload after the header: the download is part of the import
	rel := bootimages.FakeRelease{Version: "4.22.1", RHCOS: map[string]string{"rhel-9": "9.6.20260101-0", "rhel-10": "10.1.20260102-0"}, Padding: mib << 20}
	cm, files, err := rel.Build("https://rhcos.example/art")
	if err != nil {
		b.Fatal(err)
	}
	mirror := imagefetch.NewServer("/rhcos", files)
	defer mirror.Close()

	var (
		c     interface{ cloud.Cloud }
		h     *harness.Harness
		zones []string
	)
	switch name {
	case fixture.Cloudscale:
		e, err := emucs.New(emucs.Config{BootTime: importTime})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(e)
		defer srv.Close()
		c, h, zones = cscloud.New(cscloud.Options{BaseURL: srv.URL + "/", DefaultToken: "bench"}), e.Harness(), []string{"lpg1", "rma1"}
	case fixture.Exoscale:
		e, err := emuexo.New(emuexo.Config{OperationTime: importTime, Templates: []emuexo.TemplateSeed{}})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(e)
		defer srv.Close()
		c = exocloud.New(exocloud.Options{APIEndpoint: srv.URL + "/v2", DefaultAPIKey: emuexo.DefaultAPIKey, DefaultAPISecret: emuexo.DefaultAPISecret})
		h, zones = e.Harness(), []string{"ch-gva-2", "de-fra-1"}
	default:
		b.Fatalf("CLOUD: no cloud %q", name)
	}
	cl, err := c.NewClient(*c.DefaultCredentials(), cloud.NewGate(c.Name(), c.DefaultRateLimit()))
	if err != nil {
		b.Fatal(err)
	}
	ic := cl.(cloud.ImageClient)
	r, err := bootimages.ParseConfigMap(cm)
	if err != nil {
		b.Fatal(err)
	}
	o := bootimages.Options{ClusterID: "bench-1", Cloud: c, Mirror: mirror.URL}
	fmt.Printf("\nboot image import, %s, %d MiB per image, into %s:\n", name, mib, strings.Join(zones, ", "))
	for _, stream := range r.Streams() {
		img, err := r.Image(stream, "")
		if err != nil {
			b.Fatal(err)
		}
		src, err := o.Source(img, "")
		if err != nil {
			b.Fatal(err)
		}
		if c.(cloud.ImageCloud).BootImageMirrorFile(img.File) != img.File {
			if src.MD5, err = bootimages.FetchMD5(context.Background(), nil, src.URL); err != nil {
				b.Fatal(err)
			}
		}
		h.ResetRequests()
		start := time.Now()
		got, err := ic.ImportBootImage(context.Background(), o.ClusterID, src, zones)
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		calls := h.Requests()
		var total int64
		var parts []string
		for _, route := range slices.Sorted(maps.Keys(calls)) {
			total += calls[route]
			parts = append(parts, fmt.Sprintf("%s %d", route, calls[route]))
		}
		fmt.Printf("  %-42s %6.1fs  %2d images  %3d calls (%.1f per zone): %s\n", src.Name, took.Seconds(), len(got), total, float64(total)/float64(len(zones)), strings.Join(parts, ", "))
		b.ReportMetric(took.Seconds(), "s/image")
		b.ReportMetric(float64(total)/float64(len(zones)), "calls/zone")
	}
}
