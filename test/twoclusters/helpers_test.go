package twoclusters

import (
	"context"
	"net/http"
	"testing"

	sdk "github.com/cloudscale-ch/cloudscale-go-sdk/v8"
	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"

	emuexo "github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// csSDK is the official cloudscale.ch SDK on the emulator, as a person (or
// Terraform) uses the account beside the provider.
type csSDK struct{ c *sdk.Client }

func cscloudSDK(baseURL, token string) csSDK {
	c := sdk.NewClient(http.DefaultClient)
	c.BaseURL, _ = c.BaseURL.Parse(baseURL)
	c.AuthToken = token
	return csSDK{c}
}

func (s csSDK) create(t *testing.T, name string, tags map[string]string) string {
	t.Helper()
	tm := sdk.TagMap(tags)
	req := &sdk.ServerRequest{Name: name, Flavor: "flex-8-4", Image: "custom:rhcos-4.19", Zone: "rma1", SSHKeys: []string{}}
	req.Tags = &tm
	srv, err := s.c.Servers.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return srv.UUID
}

// tags reads a server's tags; false when it is gone.
func (s csSDK) tags(id string) (map[string]string, bool) {
	srv, err := s.c.Servers.Get(context.Background(), id)
	if err != nil {
		return nil, false
	}
	return srv.Tags, true
}

// exoCreate makes an instance with the official Exoscale SDK.
func exoCreate(t *testing.T, endpoint string, emu *emuexo.Emulator, name string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	c, err := v3.NewClient(credentials.NewStaticCredentials(emuexo.DefaultAPIKey, emuexo.DefaultAPISecret), v3.ClientOptWithEndpoint(v3.Endpoint(endpoint)))
	if err != nil {
		t.Fatal(err)
	}
	tpl := emu.TemplateID(emuexo.DefaultAccountName, "ch-gva-2", "rhcos-4.19")
	op, err := c.CreateInstance(ctx, v3.CreateInstanceRequest{
		Name: name, DiskSize: 20, InstanceType: &v3.InstanceType{ID: v3.UUID(emuexo.InstanceTypeID("standard.small"))},
		Template: &v3.Template{ID: v3.UUID(tpl)}, Labels: labels,
	})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = c.Wait(ctx, op, v3.OperationStateSuccess); err != nil {
		t.Fatal(err)
	}
	return string(op.Reference.ID)
}
