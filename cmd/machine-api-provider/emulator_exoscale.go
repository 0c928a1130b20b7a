package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/appuio/machine-api-provider/pkg/emulator/exoscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

func exoscaleEmulatorCommand() *cobra.Command {
	var (
		cfg           exoscale.Config
		listen        string
		accounts      []string
		templates     []string
		faults        []string
		opFailures    []string
		instanceQuota int64
		quiet         bool
	)
	cmd := &cobra.Command{
		Use:   "exoscale",
		Short: "Emulate the Exoscale API (v2)",
		Long: `Emulate the Exoscale API v2 on a local address, for the unmodified egoscale v3
SDK: signed requests (EXO2-HMAC-SHA256), asynchronous operations, zone-local
endpoints.

The endpoint of zone ch-gva-2 (the SDK's default zone) is http://<listen>/v2, that
of any other zone http://<listen>/<zone>/v2; GET /v2/zone lists them all, so a
client that looks a zone's endpoint up lands in it. Requests are signed with an
account's key and secret: the default account's are printed at start.

Faults are injected per route with --fault, or at run time over
/_emulator/faults; operations are made to fail with --operation-failure. Request
counts are at /_emulator/requests and /metrics.`,
		Example: `  machine-api-provider emulator exoscale --listen 127.0.0.1:8383 --boot-time 3s \
    --fault 'route=POST /v2/instance,lostResponseRate=1,times=1' \
    --operation-failure 'command=create-instance,rate=0.2,reason=unavailable'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range faults {
				r, err := harness.ParseRule(f)
				if err != nil {
					return err
				}
				cfg.Faults = append(cfg.Faults, r)
			}
			for _, f := range opFailures {
				o, err := exoscale.ParseOperationFailure(f)
				if err != nil {
					return err
				}
				cfg.OperationFailures = append(cfg.OperationFailures, o)
			}
			for _, a := range accounts {
				acct, err := parseExoscaleAccount(a)
				if err != nil {
					return err
				}
				cfg.Accounts = append(cfg.Accounts, acct)
			}
			if len(cfg.Accounts) == 0 {
				cfg.Accounts = []exoscale.Account{exoscale.DefaultAccount}
			}
			if instanceQuota != 0 {
				for i := range cfg.Accounts {
					if _, set := cfg.Accounts[i].Quotas["instance"]; !set {
						if cfg.Accounts[i].Quotas == nil {
							cfg.Accounts[i].Quotas = map[string]int64{}
						}
						cfg.Accounts[i].Quotas["instance"] = instanceQuota
					}
				}
			}
			if cmd.Flags().Changed("template") {
				cfg.Templates = []exoscale.TemplateSeed{}
				for _, name := range templates {
					if name != "" {
						cfg.Templates = append(cfg.Templates, exoscale.TemplateSeed{Name: name, DefaultUser: "core", BootMode: "uefi"})
					}
				}
			}
			emu, err := exoscale.New(cfg)
			if err != nil {
				return err
			}
			var handler http.Handler = emu
			if !quiet {
				handler = accessLog(emu)
			}
			url, done, err := harness.Serve(cmd.Context(), listen, handler)
			if err != nil {
				return err
			}
			printExoscaleUsage(cmd, url, cfg.Accounts)
			return <-done
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8383", "address to listen on (port 0 picks a free one)")
	f.DurationVar(&cfg.BootTime, "boot-time", 3*time.Second, "how long a created, started or rebooted instance is \"starting\" before it is \"running\"")
	f.DurationVar(&cfg.ActionTime, "action-time", 0, "how long stop (\"stopping\") and delete (\"destroying\") take (default: the boot time)")
	f.DurationVar(&cfg.OperationTime, "operation-time", exoscale.DefaultOperationTime, "the least time an operation stays \"pending\"")
	f.StringVar(&cfg.StateFile, "state-file", "", "keep the emulated world in this file, so it survives a restart")
	f.StringArrayVar(&accounts, "account", nil, "an account, 'name=NAME,key=EXO...,secret=SECRET[,instance-quota=N][,policy-file=ROLE-POLICY.json]' (repeatable; default: one account whose key and secret are printed)")
	f.Int64Var(&instanceQuota, "instance-quota", 0, fmt.Sprintf("instances each account may have (default %d; -1: unlimited)", exoscale.DefaultQuotas["instance"]))
	f.StringArrayVar(&templates, "template", []string{exoscale.DefaultTemplates[0].Name}, "a private template of the first account present in every zone, as RHCOS is registered (repeatable; --template '' for none)")
	f.StringArrayVar(&faults, "fault", nil, "fault-injection rule, e.g. 'route=POST /v2/instance,errorRate=0.5,errorStatus=503' (repeatable; see docs/emulator.md)")
	f.StringArrayVar(&opFailures, "operation-failure", nil, "make operations fail, e.g. 'command=create-instance,rate=1,times=1,reason=unavailable' (repeatable)")
	f.Int64Var(&cfg.Seed, "seed", 0, "seed for fault injection and operation failures, for reproducible runs (0: random)")
	f.BoolVar(&quiet, "quiet", false, "do not log requests")
	return cmd
}

// parseExoscaleAccount reads --account: name=...,key=...,secret=...
func parseExoscaleAccount(s string) (exoscale.Account, error) {
	var a exoscale.Account
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return a, fmt.Errorf("--account: %q is not key=value (want name=...,key=...,secret=...)", kv)
		}
		switch strings.TrimSpace(k) {
		case "name":
			a.Name = v
		case "key":
			a.Key = v
		case "secret":
			a.Secret = v
		case "instance-quota":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return a, fmt.Errorf("--account: instance-quota %q is not a number", v)
			}
			a.Quotas = map[string]int64{"instance": n}
		case "policy-file":
			b, err := os.ReadFile(v)
			if err != nil {
				return a, fmt.Errorf("--account: policy-file: %w", err)
			}
			if a.Policy, err = exoscale.ParsePolicy(b); err != nil {
				return a, fmt.Errorf("--account: policy-file %s: %w", v, err)
			}
		default:
			return a, fmt.Errorf("--account: unknown field %q (want name, key, secret, instance-quota, policy-file)", k)
		}
	}
	if a.Name == "" || a.Key == "" || a.Secret == "" {
		return a, fmt.Errorf("--account needs name, key and secret")
	}
	return a, nil
}

// printExoscaleUsage says how to reach the emulator. The default account's
// secret is printed (it is a fixed, public value); secrets given with
// --account are not repeated.
func printExoscaleUsage(cmd *cobra.Command, url string, accounts []exoscale.Account) {
	w := cmd.OutOrStdout()
	endpoint := url + "v2"
	fmt.Fprintf(w, "Exoscale emulator listening on %s\n", url)
	fmt.Fprintf(w, "  endpoint (ch-gva-2): %s\n  other zones:         %s<zone>/v2 (GET %s/zone lists them)\n", endpoint, url, endpoint)
	first := accounts[0]
	secret := "(as given with --account)"
	if first.Key == exoscale.DefaultAPIKey && first.Secret == exoscale.DefaultAPISecret {
		secret = first.Secret
	}
	for _, a := range accounts {
		fmt.Fprintf(w, "  account %s: key %s\n", a.Name, a.Key)
	}
	fmt.Fprintf(w, `
  export EXOSCALE_API_ENDPOINT=%s
  export EXOSCALE_API_KEY=%s
  export EXOSCALE_API_SECRET=%s

With egoscale v3 (github.com/exoscale/egoscale/v3 v3.1.43):

  client, err := v3.NewClient(credentials.NewEnvCredentials(),
      v3.ClientOptWithEndpoint(v3.Endpoint(os.Getenv("EXOSCALE_API_ENDPOINT"))))
  // another zone: ep, err := client.GetZoneAPIEndpoint(ctx, "de-fra-1"); client = client.WithEndpoint(ep)
  op, err := client.CreateInstance(ctx, v3.CreateInstanceRequest{...})
  op, err = client.Wait(ctx, op, v3.OperationStateSuccess)
`, endpoint, first.Key, secret)
}
