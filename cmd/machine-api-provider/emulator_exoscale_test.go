package main

import (
	"bufio"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	v3 "github.com/exoscale/egoscale/v3"
	"github.com/exoscale/egoscale/v3/credentials"

	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
)

// What the command prints is enough for the SDK to work against it.
func TestExoscaleEmulatorCommandPrintsWhatTheSDKNeeds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	cmd := emulatorCommand()
	cmd.SetArgs([]string{"exoscale", "--listen", "127.0.0.1:0", "--quiet", "--boot-time", "0", "--operation-time", "0"})
	cmd.SetOut(w)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	env := map[string]string{}
	exported := regexp.MustCompile(`^\s*export (EXOSCALE_API_\w+)=(\S+)$`)
	sc := bufio.NewScanner(out)
	for len(env) < 3 && sc.Scan() {
		if m := exported.FindStringSubmatch(sc.Text()); m != nil {
			env[m[1]] = m[2]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if env["EXOSCALE_API_KEY"] != exoscale.DefaultAPIKey || env["EXOSCALE_API_SECRET"] != exoscale.DefaultAPISecret || !strings.HasSuffix(env["EXOSCALE_API_ENDPOINT"], "/v2") {
		t.Fatalf("printed %v", env)
	}
	c, err := v3.NewClient(credentials.NewStaticCredentials(env["EXOSCALE_API_KEY"], env["EXOSCALE_API_SECRET"]),
		v3.ClientOptWithEndpoint(v3.Endpoint(env["EXOSCALE_API_ENDPOINT"])))
	if err != nil {
		t.Fatal(err)
	}
	ep, err := c.GetZoneAPIEndpoint(ctx, "de-fra-1")
	if err != nil {
		t.Fatal(err)
	}
	fra := c.WithEndpoint(ep)
	tpls, err := fra.ListTemplates(ctx, v3.ListTemplatesWithVisibility(v3.ListTemplatesVisibilityPrivate))
	if err != nil {
		t.Fatal(err)
	}
	rhcos, err := tpls.FindTemplate("rhcos-4.19")
	if err != nil {
		t.Fatalf("the default RHCOS template: %v", err)
	}
	op, err := fra.CreateInstance(ctx, v3.CreateInstanceRequest{
		Name: "from-cmd", DiskSize: 20, Template: &v3.Template{ID: rhcos.ID},
		InstanceType: &v3.InstanceType{ID: v3.UUID(exoscale.InstanceTypeID("standard.medium"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = fra.Wait(ctx, op, v3.OperationStateSuccess); err != nil {
		t.Fatal(err)
	}
	if inst, err := fra.GetInstance(ctx, op.Reference.ID); err != nil || inst.State != v3.InstanceStateRunning {
		t.Fatalf("GetInstance: %+v, %v", inst, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the command ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not end with its context")
	}
}

func TestParseExoscaleAccount(t *testing.T) {
	a, err := parseExoscaleAccount("name=prod,key=EXO1,secret=s=ecret,instance-quota=50")
	if err != nil || a.Name != "prod" || a.Key != "EXO1" || a.Secret != "s=ecret" || a.Quotas["instance"] != 50 {
		t.Fatalf("parsed %+v, %v", a, err)
	}
	for _, bad := range []string{"name=prod,key=EXO1", "name=prod,key=EXO1,secret=s,colour=red", "prod", "name=a,key=b,secret=c,instance-quota=many"} {
		if _, err := parseExoscaleAccount(bad); err == nil {
			t.Errorf("parseExoscaleAccount(%q) accepted", bad)
		}
	}
}
