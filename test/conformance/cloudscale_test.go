package conformance

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/imagefetch"
)

const sdkIntegrationPackage = "github.com/cloudscale-ch/cloudscale-go-sdk/v8/test/integration"

// cloudscaleSuite is the part of the SDK's suite the emulator must pass: the
// resources the provider uses (servers, server groups, volumes, networks,
// subnets, flavors, regions) and their tag tests, and custom-image imports.
// Load balancers, object users and bucket metrics are not emulated. The
// emulator downloads an import's image: the suite's image URL (on the
// internet) is served from memory (sdkImageMirror); the tests that fetch the
// image's checksum from the internet themselves, or expect the real
// server's 404, cannot pass here.
var cloudscaleSuite = []string{
	"TestListFlavors",
	"TestListRegions",
	"TestIntegrationServer_CRUD",
	"TestIntegrationServer_UpdateStatus",
	"TestIntegrationServer_UpdateRest",
	"TestIntegrationServer_Actions",
	"TestIntegrationServer_MultipleVolumes",
	"TestIntegrationServer_MultiSite",
	"TestIntegrationServerGroup_CRUD",
	"TestIntegrationServerGroup_MultiSite",
	"TestIntegrationVolume_CreateAttached",
	"TestIntegrationVolume_CreateFromSnapshot",
	"TestIntegrationVolume_CreateWithoutServer",
	"TestIntegrationVolume_AttachToNewServer",
	"TestIntegrationVolume_ListByName",
	"TestIntegrationVolume_MultiSite",
	"TestIntegrationVolumeSnapshot_CRUD",
	"TestIntegrationVolumeSnapshot_Update",
	"TestIntegrationNetwork_CRUD",
	"TestIntegrationNetwork_CreateWithoutSubnet",
	"TestIntegrationNetwork_CreateAttached",
	"TestIntegrationNetwork_Reattach",
	"TestIntegrationNetwork_Reorder",
	"TestIntegrationNetwork_Update",
	"TestIntegrationNetwork_MultiSite",
	"TestIntegrationSubnet_GetAndList",
	"TestIntegrationSubnet_CRUD",
	"TestIntegrationSubnet_Update",
	"TestIntegrationSubnet_InitialEmptyDNSServers",
	"TestIntegrationTags_Server",
	"TestIntegrationTags_Volume",
	"TestIntegrationTags_VolumeFromSnapshot",
	"TestIntegrationTags_Snapshot",
	"TestIntegrationTags_Network",
	"TestIntegrationTags_Subnet",
	"TestIntegrationTags_ServerGroup",
	"TestIntegrationTags_FloatingIP",
	"TestIntegrationTags_CustomImage",
	"TestIntegrationFloatingIP_CRUD_Server",
	"TestIntegrationFloatingIP_Update",
	"TestIntegrationFloatingIP_MultiSite",
	"TestIntegrationFloatingIP_PrefixLength",
	"TestIntegrationFloatingIP_Global",
	"TestIntegrationFloatingIP_WithoutServer",
	"TestIntegrationCustomImage_Update",
	"TestIntegrationCustomImage_Boot",
}

// sdkImageMirror serves the image URL of the SDK suite's custom-image
// tests (a raw image, as the suite imports it).
var sdkImageMirror = imagefetch.Mirror{"https://at-images.objects.lpg.cloudscale.ch/prod/alpine.raw": []byte("alpine, raw, from the conformance test")}

// TestCloudscaleSDKIntegrationSuite runs the SDK's integration tests, as
// published with the SDK version in go.mod, against an in-process emulator
// whose servers take a second to boot, and requires every test of
// cloudscaleSuite to pass.
func TestCloudscaleSDKIntegrationSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the SDK suite takes minutes (its network tests sleep 20 s each); run without -short")
	}
	const token = "conformance-token"
	emu, err := cloudscale.New(cloudscale.Config{
		Tokens:      map[string]cloudscale.Access{token: cloudscale.ReadWrite},
		BootTime:    time.Second,
		ImageClient: &http.Client{Transport: sdkImageMirror},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, _, err := emu.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	goBin := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		goBin = root + "/bin/go"
	}
	cmd := exec.Command(goBin, "test", "-tags", "integration", "-count=1", "-v", "-timeout", "20m",
		"-run", "^("+strings.Join(cloudscaleSuite, "|")+")$", sdkIntegrationPackage)
	cmd.Env = append(os.Environ(), "CLOUDSCALE_API_URL="+url, "CLOUDSCALE_API_TOKEN="+token)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	result := regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+)`)
	passed, failed := map[string]bool{}, []string{}
	scanner := bufio.NewScanner(out)
	for scanner.Scan() {
		line := scanner.Text()
		t.Log(line)
		if m := result.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "PASS":
				passed[m[2]] = true
			case "FAIL":
				failed = append(failed, m[2])
			}
		}
	}
	runErr := cmd.Wait()

	missing := []string{}
	for _, name := range cloudscaleSuite {
		if !passed[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(failed)
	if len(missing) > 0 || runErr != nil {
		t.Fatalf("SDK suite: %d of %d required tests did not pass: %v (failed: %v; go test: %v)",
			len(missing), len(cloudscaleSuite), missing, failed, runErr)
	}
	if got := emu.Harness().Count("POST /v1/servers"); got < 10 {
		t.Errorf("the suite created only %d servers on the emulator; is CLOUDSCALE_API_URL honoured?", got)
	}
	t.Logf("SDK suite: all %d required tests passed against the emulator (%d requests served)",
		len(cloudscaleSuite), emu.Harness().Total())
}
