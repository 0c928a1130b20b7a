package main

import (
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/appuio/machine-api-provider/pkg/emulator/cloudscale"
	"github.com/appuio/machine-api-provider/pkg/emulator/harness"
)

func emulatorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "emulator",
		Short: "Run an emulated cloud API that the official SDKs talk to",
	}
	cmd.AddCommand(cloudscaleEmulatorCommand())
	cmd.AddCommand(exoscaleEmulatorCommand())
	return cmd
}

func cloudscaleEmulatorCommand() *cobra.Command {
	var (
		cfg            cloudscale.Config
		listen         string
		tokens, roToks []string
		faults         []string
		quiet          bool
	)
	cmd := &cobra.Command{
		Use:   "cloudscale",
		Short: "Emulate the cloudscale.ch API (v1)",
		Long: `Emulate the cloudscale.ch API (v1) on a local address.

Point the SDK (or curl) at it with CLOUDSCALE_API_URL=http://<listen>/ and any
token given with --token (any non-empty token when none is given).

Faults are injected per route with --fault, or at run time over
/_emulator/faults; request counts are at /_emulator/requests and /metrics.`,
		Example: `  machine-api-provider emulator cloudscale --listen 127.0.0.1:8282 --boot-time 3s \
    --fault 'route=POST /v1/servers,lostResponseRate=1,times=1'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range faults {
				r, err := harness.ParseRule(f)
				if err != nil {
					return err
				}
				cfg.Faults = append(cfg.Faults, r)
			}
			if len(tokens)+len(roToks) > 0 {
				cfg.Tokens = map[string]cloudscale.Access{}
				for _, t := range tokens {
					cfg.Tokens[t] = cloudscale.ReadWrite
				}
				for _, t := range roToks {
					cfg.Tokens[t] = cloudscale.ReadOnly
				}
			}
			emu, err := cloudscale.New(cfg)
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
			fmt.Fprintf(cmd.OutOrStdout(), "cloudscale.ch emulator listening on %s\n  export CLOUDSCALE_API_URL=%s\n", url, url)
			return <-done
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8282", "address to listen on (port 0 picks a free one)")
	f.DurationVar(&cfg.BootTime, "boot-time", 3*time.Second, "how long a created or started server stays \"changing\" before it is \"running\"")
	f.DurationVar(&cfg.ActionTime, "action-time", 0, "how long stop and reboot take (default: the boot time)")
	f.DurationVar(&cfg.DeleteTime, "delete-time", 0, "how long a deleted server is still shown, \"changing\", after its DELETE was answered (0: gone at once)")
	f.StringVar(&cfg.StateFile, "state-file", "", "keep the emulated world in this file, so it survives a restart")
	f.StringArrayVar(&tokens, "token", nil, "accept this API token with write access (repeatable)")
	f.StringArrayVar(&roToks, "read-only-token", nil, "accept this API token for reads only (repeatable)")
	f.StringArrayVar(&faults, "fault", nil, "fault-injection rule, e.g. 'route=POST /v1/servers,errorRate=0.5,errorStatus=503' (repeatable; see README)")
	f.Int64Var(&cfg.Seed, "seed", 0, "seed for fault injection, for reproducible runs (0: random)")
	f.BoolVar(&quiet, "quiet", false, "do not log requests")
	return cmd
}

// accessLog logs method, path and status of each request. Bodies and
// headers are never logged: they carry tokens and user data.
func accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			log.Printf("%s %s %d %s", r.Method, r.URL.Path, rec.status, time.Since(start).Round(time.Microsecond))
		}()
		next.ServeHTTP(rec, r)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
